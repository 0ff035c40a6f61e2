"""The closed word lists the fact rules accept: occupations, pets, study subjects, activities, places.

The lists are the precision lever: a phrase outside them is not a fact, however fact-like its sentence looks
("I'm a big fan" is no occupation, "I study hard" no subject).
"""

# Occupations an English speaker states with "I'm a ..." / "I work as a ...", longest first where they overlap.
_OCCUPATION_WORDS = frozenset("""
teacher nurse engineer developer programmer doctor physician surgeon dentist pharmacist lawyer attorney paralegal
student designer artist painter sculptor illustrator chef baker writer author novelist poet journalist editor
musician singer songwriter dancer choreographer actor actress counselor counsellor therapist psychologist
psychiatrist photographer accountant banker architect scientist researcher professor lecturer librarian firefighter
pilot mechanic electrician plumber carpenter farmer veterinarian consultant manager entrepreneur salesperson
receptionist cashier barista waiter waitress bartender tutor nanny caregiver paramedic dietitian nutritionist
translator interpreter midwife optometrist physiotherapist economist analyst programmer animator filmmaker producer
director principal pastor firefighter soldier hairdresser stylist florist
""".split())  # noqa: SIM905
OCCUPATIONS = _OCCUPATION_WORDS | frozenset({
    "software engineer", "software developer", "web developer", "data scientist", "data analyst",
    "graphic designer", "fashion designer", "interior designer", "social worker", "police officer",
    "flight attendant", "real estate agent", "project manager", "product manager", "personal trainer",
    "college student", "university student", "high school student", "grad student", "graduate student",
    "phd student", "medical student", "law student", "nursing student", "art student", "high school teacher",
    "elementary school teacher", "music teacher", "art teacher", "english teacher", "math teacher",
    "yoga instructor", "dance instructor", "dance teacher", "nurse practitioner", "physical therapist",
    "occupational therapist", "civil engineer", "mechanical engineer", "electrical engineer",
    "marketing manager", "stay-at-home dad", "stay-at-home mom", "mental health counselor", "school counselor",
})
# Words that may precede an occupation without changing what it is ("a freelance photographer").
OCCUPATION_MODIFIERS = frozenset("""
freelance full-time part-time professional registered licensed certified senior junior qualified practicing
practising self-employed trained
""".split())  # noqa: SIM905
STUDENT_OCCUPATIONS = frozenset(o for o in OCCUPATIONS if o.endswith("student"))

ZH_OCCUPATIONS = frozenset("""
老师 教师 护士 工程师 医生 律师 学生 大学生 研究生 博士生 中学生 高中生 小学生 设计师 程序员 厨师 作家 记者 编辑
会计 会计师 建筑师 科学家 研究员 教授 警察 消防员 飞行员 司机 农民 画家 歌手 演员 舞者 摄影师 翻译 销售 经理
产品经理 软件工程师 前端工程师 后端工程师 数据分析师 心理咨询师 咨询师 药剂师 牙医 兽医 公务员 银行职员 理发师
服务员 咖啡师 导游 主播 模特 音乐家 律师助理 幼师 幼儿园老师 小学老师 中学老师 大学老师 英语老师 数学老师 音乐老师
美术老师
""".split())  # noqa: SIM905

# Pet words and the species they are filed under.
SPECIES = {
    "dog": "dog", "dogs": "dog", "puppy": "dog", "pup": "dog", "cat": "cat", "kitten": "cat", "kitty": "cat",
    "hamster": "hamster", "rabbit": "rabbit", "bunny": "rabbit", "bird": "bird", "parrot": "parrot",
    "budgie": "bird", "fish": "fish", "goldfish": "fish", "turtle": "turtle", "tortoise": "turtle",
    "guinea pig": "guinea pig", "horse": "horse", "pony": "horse", "snake": "snake", "lizard": "lizard",
    "gecko": "lizard",
}
ZH_SPECIES = {
    "猫": ("cat", "猫"), "小猫": ("cat", "猫"), "猫咪": ("cat", "猫"), "狗": ("dog", "狗"), "小狗": ("dog", "狗"),
    "狗狗": ("dog", "狗"), "兔子": ("rabbit", "兔子"), "小兔子": ("rabbit", "兔子"), "仓鼠": ("hamster", "仓鼠"),
    "鹦鹉": ("parrot", "鹦鹉"), "鱼": ("fish", "鱼"), "金鱼": ("fish", "鱼"), "乌龟": ("turtle", "乌龟"),
}

# What people study; a subject phrase must end in one of these (or be a language).
_SUBJECT_WORDS = frozenset("""
math maths mathematics physics chemistry biology law medicine nursing history psychology economics philosophy art
literature music architecture business finance accounting marketing sociology education linguistics journalism
design film photography statistics neuroscience biochemistry anthropology geography geology engineering science
sciences theology dance theater theatre communications pharmacy dentistry management
""".split())  # noqa: SIM905
SUBJECTS = _SUBJECT_WORDS | frozenset({"computer science", "political science", "art history", "data science"})
LANGUAGES = frozenset("""
English French Spanish German Italian Portuguese Japanese Chinese Mandarin Cantonese Korean Russian Arabic Hindi
Dutch Swedish Greek Latin Turkish Polish Hebrew Vietnamese Thai
""".split())  # noqa: SIM905

# Activities that stand alone as a liking ("I love hiking in the hills" -> hiking); other gerunds need an object.
ACTIVITIES = frozenset("""
hiking painting reading swimming running cooking baking dancing camping fishing gardening writing singing drawing
cycling biking skiing snowboarding surfing climbing traveling travelling knitting sewing sketching jogging skating
kayaking sailing hunting shopping gaming performing acting photographing crafting journaling meditating volunteering
bowling boxing golfing rowing diving snorkeling horseback riding pottery yoga photography
""".split())  # noqa: SIM905

# Capitalised words that begin sentences or name times, never a place, employer or person.
NOT_NAMES = frozenset("""
I I'm I've I'll I'd Im Mom Mum Dad Mommy Daddy God Christmas Easter Halloween Thanksgiving Today Tomorrow Yesterday
Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June July August September
October November December Hey Hi Hello Thanks Thank Yes Yeah No Oh Wow OK Ok Okay LOL Lol Omg OMG And But So The A
An It This That My Our Your He She They We You Sir Madam Mr Mrs Ms Dr
""".split())  # noqa: SIM905

# Chinese places a "lives in" / "from" object may be: names ending in an administrative suffix, or these.
ZH_PLACE_SUFFIXES = ("省", "市", "区", "县", "镇", "乡", "村", "州", "国", "岛", "湾", "港")
ZH_PLACES = frozenset("""
北京 上海 天津 重庆 深圳 广州 成都 武汉 南京 西安 长沙 厦门 青岛 大连 沈阳 哈尔滨 长春 昆明 贵阳 南宁 海口 三亚 合肥
南昌 福州 济南 郑州 石家庄 太原 呼和浩特 兰州 西宁 银川 乌鲁木齐 拉萨 宁波 无锡 珠海 东莞 佛山 香港 澳门 台北 台湾
新疆 西藏 内蒙古 东北 江南 山东 山西 河南 河北 湖南 湖北 广东 广西 江苏 浙江 安徽 福建 江西 四川 云南 贵州 陕西 甘肃
青海 海南 辽宁 吉林 黑龙江 宁夏 日本 韩国 新加坡 马来西亚 泰国 越南 印度 澳大利亚 新西兰 加拿大 意大利 西班牙 葡萄牙
巴西 阿根廷 墨西哥 俄罗斯 埃及 东京 大阪 首尔 伦敦 巴黎 柏林 纽约 洛杉矶 旧金山 西雅图 波士顿 芝加哥 多伦多 温哥华
悉尼 墨尔本 曼谷 迪拜
""".split())  # noqa: SIM905
