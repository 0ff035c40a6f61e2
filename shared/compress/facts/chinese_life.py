"""Chinese rules for where the speaker lives and comes from, where and as what they work, and what they study."""
from shared.compress.facts.fact import Fact, Hit, Said
from shared.compress.facts.han import HAN, is_place, place
from shared.compress.facts.vocabulary import ZH_OCCUPATIONS
from shared.text import patterns

_NOW = r"(?:现在|目前|已经|刚|刚刚|终于|一直|也|还)*"
_LIVES = patterns.compile(r"我(?:们)?" + _NOW + r"(?:住在|搬到了?|搬去了?|搬家到了?|定居在|定居于)(?P<run>" + HAN
                          + "{2,12})")
_FROM = patterns.compile(r"我(?:来自|是从|的老家是|的老家在|老家是|老家在)(?P<run>" + HAN + "{2,12})")
_FROM_PEOPLE = patterns.compile(r"我是(?P<run>" + HAN + r"{2,4})人(?!" + HAN + ")")
_WORKS = patterns.compile(r"我" + _NOW + r"在(?P<org>[\u4e00-\u9fffA-Za-z0-9&]{2,12}?)(?:工作|上班|实习|任职)")
_COMPANIES = frozenset("""
阿里巴巴 阿里 腾讯 百度 华为 字节跳动 字节 京东 美团 小米 网易 谷歌 微软 苹果 亚马逊 滴滴 拼多多 快手 新浪 中兴 联想
比亚迪 特斯拉 星巴克 麦当劳 肯德基 宜家 蚂蚁金服 携程 大疆 顺丰 招商银行 中国银行 工商银行 建设银行
""".split())  # noqa: SIM905
_EMPLOYER_SUFFIXES = ("公司", "集团", "银行", "医院", "大学", "学院", "学校", "中学", "小学", "研究所", "研究院",
                      "事务所", "工作室", "餐厅", "酒店", "科技", "实验室", "报社", "电视台", "政府", "幼儿园")
_NOT_EMPLOYER_START = (*"一这那家某个哪大小", "我们", "你们")
_OCCUPATION_LEADS = [
    patterns.compile(r"我" + _NOW + r"是(?:一名|一个|一位|个|名|位)?"),
    patterns.compile(r"我的(?:工作|职业)是(?:一名|一个|一位|当)?"),
    patterns.compile(r"我" + _NOW + r"(?:当|做)(?:了)?(?:一名|一个|个|名)?"),
]
_AFTER_OCCUPATION = ("啦", "呢", "哦", "了", "呀", "吧", "啊")
_SCHOOL = patterns.compile(r"我" + _NOW + r"(?:正)?在(?P<school>[\u4e00-\u9fffA-Za-z]{2,12}?)"
                           r"(?:读书|上学|读大学|上大学|读研究生|读研|读博士|读博|念书|读高中|上高中|读本科|读初中|上初中)")
_SCHOOL_SUFFIXES = ("大学", "学院", "学校", "中学", "小学", "高中", "初中", "大", "一中", "二中", "附中")
_SUBJECT = patterns.compile(r"我(?:学的是|的专业是|主修|读的是|是学)(?P<run>" + HAN + "{2,10})")
_LATIN_NAME = patterns.compile(r"[A-Z][A-Za-z0-9&]++")
_HAN_RUN = patterns.compile(HAN + "++")
_PARTICLE = patterns.compile(r"[的了呢啊呀吧哦]")
_SUBJECTS = frozenset("""
计算机 计算机科学 数学 物理 化学 生物 法律 法学 医学 护理 历史 经济 金融 会计 哲学 艺术 音乐 美术 建筑 设计 英语
日语 中文 新闻 市场营销 管理 工商管理 软件工程 电子工程 机械工程 土木工程 教育 文学 汉语言文学 统计 药学 心理学
经济学
""".split())  # noqa: SIM905


def lives_in(sentence: str, said: Said) -> list[Hit]:
    """Where the speaker lives: "我住在杭州", "我搬到了上海", "我现在住在北京朝阳区"."""
    hits = []
    for match in _LIVES.finditer(sentence):
        where = place(match.group("run"))
        if where:
            end = match.start("run") + len(where)
            hits.append(Hit(Fact("lives_in", where, f"{said.speaker}住在{where}", entities=(where,)),
                            match.start(), end))
    return hits


def origin(sentence: str, said: Said) -> list[Hit]:
    """Origin: "我来自四川", "我老家是湖南", "我是北京人" (a known place or a name ending in 省/市/国...)."""
    hits = []
    for match in _FROM.finditer(sentence):
        where = place(match.group("run"))
        if where:
            hits.append(Hit(Fact("from", where, f"{said.speaker}来自{where}", entities=(where,)),
                            match.start(), match.start("run") + len(where)))
    for match in _FROM_PEOPLE.finditer(sentence):
        where = match.group("run")
        if is_place(where):
            hits.append(Hit(Fact("from", where, f"{said.speaker}来自{where}", entities=(where,)),
                            match.start(), match.end()))
    return hits


def employer(org: str) -> bool:
    """Whether `org` reads as an employer: a known company, a Latin name, or a name ending in 公司, 医院 ..."""
    if org.startswith(_NOT_EMPLOYER_START) or is_place(org) or org.endswith(("里", "边", "附近")):
        return False
    if _LATIN_NAME.fullmatch(org):
        return True
    return org in _COMPANIES or (org.endswith(_EMPLOYER_SUFFIXES) and len(org) > 2 and
                                 not any(org == s for s in _EMPLOYER_SUFFIXES))


def works_at(sentence: str, said: Said) -> list[Hit]:
    """Employer: "我在腾讯工作", "我在协和医院上班" (a known company, a Latin name, or ending in 公司/医院...)."""
    return [Hit(Fact("works_at", m.group("org"), f"{said.speaker}在{m.group('org')}工作", entities=(m.group("org"),)),
                m.start(), m.end())
            for m in _WORKS.finditer(sentence) if employer(m.group("org"))]


def occupation(sentence: str, said: Said) -> list[Hit]:
    """Occupation: "我是一名护士", "我是老师", "我的工作是程序员" (whitelisted, followed by nothing new)."""
    hits = []
    for lead in _OCCUPATION_LEADS:
        for match in lead.finditer(sentence):
            run = _HAN_RUN.match(sentence, match.end())
            if not run:
                continue
            for size in range(min(8, len(run.group(0))), 1, -1):
                job, rest = run.group(0)[:size], run.group(0)[size:]
                if job in ZH_OCCUPATIONS and (not rest or rest.startswith(_AFTER_OCCUPATION)):
                    hits.append(Hit(Fact("occupation", job, f"{said.speaker}是{job}"), match.start(),
                                    match.end() + size))
                    break
    return hits


def studies(sentence: str, said: Said) -> list[Hit]:
    """School or subject: "我在北京大学读书", "我学的是计算机专业"."""
    hits = []
    for match in _SCHOOL.finditer(sentence):
        school = match.group("school")
        named = school.endswith(_SCHOOL_SUFFIXES) and len(school) > 2 and not school.startswith(_NOT_EMPLOYER_START)
        if named or is_place(school):
            hits.append(Hit(Fact("studies", school, f"{said.speaker}在{school}读书", entities=(school,)),
                            match.start(), match.end()))
    for match in _SUBJECT.finditer(sentence):
        run = match.group("run")
        subject = run.split("专业")[0] if "专业" in run else run
        subject = _PARTICLE.split(subject)[0]
        if subject in _SUBJECTS or (subject.endswith(("学", "工程")) and len(subject) >= 3
                                    and not subject.endswith(("大学", "中学", "小学", "同学"))):
            hits.append(Hit(Fact("studies", subject, f"{said.speaker}学的是{subject}"), match.start(),
                            match.start("run") + len(subject)))
    return hits
