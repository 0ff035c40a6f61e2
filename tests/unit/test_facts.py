"""The rule-based fact extractor finds plain first-person statements and nothing that only looks like one."""
from datetime import UTC, datetime

import pytest

from shared.compress import Window
from shared.compress.facts import RuleFactExtractor, changes, facts_in_turn
from tests.support.turns import make_turn

FRIDAY = datetime(2024, 5, 10, 12, 0, tzinfo=UTC)


def slots(text: str, lang: str = "en", speaker: str = "Ana") -> dict[str, str]:
    """The facts of one user turn as {attribute: value}."""
    drafts = facts_in_turn(make_turn(text, speaker=speaker, ts=FRIDAY), lang)
    return {d.slot.attribute: d.slot.value for d in drafts if d.slot}


def texts(text: str, lang: str = "en") -> list[str]:
    return [d.text for d in facts_in_turn(make_turn(text, ts=FRIDAY), lang)]


@pytest.mark.parametrize(("text", "attribute", "value"), [
    ("I live in Porto.", "lives_in", "Porto"),
    ("I've just moved to Lisbon with my wife.", "lives_in", "Lisbon"),
    ("I'm living in New York City now.", "lives_in", "New York City"),
    ("We moved to the Netherlands last year.", "lives_in", "Netherlands"),
    ("I relocated to St. Louis in March.", "lives_in", "St. Louis"),
    ("I'm originally from Sweden.", "from", "Sweden"),
    ("I grew up in Ohio, so winters don't scare me.", "from", "Ohio"),
    ("It's a gift from my grandma in my home country, Sweden.", "from", "Sweden"),
    ("I work at Google.", "works_at", "Google"),
    ("I got a job at Acme Corp last week!", "works_at", "Acme Corp"),
    ("I started a new job at Spotify.", "works_at", "Spotify"),
    ("I joined Stripe as a software engineer.", "works_at", "Stripe"),
    ("I joined Stripe as a software engineer.", "occupation", "software engineer"),
    ("I'm a nurse.", "occupation", "nurse"),
    ("I work as a freelance photographer.", "occupation", "freelance photographer"),
    ("My job is a counselor at a clinic.", "occupation", "counselor"),
    ("I became a teacher in 2019.", "occupation", "teacher"),
    ("I'm studying computer science at MIT.", "studies", "computer science at MIT"),
    ("I'm majoring in biology.", "studies", "biology"),
    ("I study Japanese.", "studies", "Japanese"),
    ("I'm a psychology major.", "studies", "psychology"),
    ("I have a dog named Rex.", "pet:dog", "Rex"),
    ("I got a new puppy called Max!", "pet:dog", "Max"),
    ("My cat's name is Luna.", "pet:cat", "Luna"),
    ("My dog Rex loves the park.", "pet:dog", "Rex"),
    ("We adopted a kitten named Miso.", "pet:cat", "Miso"),
    ("I have a hamster.", "pet:hamster", "hamster"),
    ("I adopted a rescue dog last Saturday!", "pet:dog", "dog"),
    ("My wife Jo is great.", "partner", "Jo"),
    ("My boyfriend's name is Sam.", "partner", "Sam"),
    ("I'm married to Alex.", "partner", "Alex"),
    ("I'm dating Kim.", "partner", "Kim"),
    ("My sister Maria lives in Spain.", "family:sister:maria", "Maria"),
    ("My older brother Tom is a chef.", "family:brother:tom", "Tom"),
    ("My mom Linda called.", "family:mother:linda", "Linda"),
    ("I love hiking.", "preference:hiking", "likes"),
    ("I love hiking, do you?", "preference:hiking", "likes"),
    ("I really enjoy painting in the mornings.", "preference:painting", "likes"),
    ("I'm a big fan of pottery - it's calming.", "preference:pottery", "likes"),
    ("I'm really into jazz these days.", "preference:jazz", "likes"),
    ("My favourite food is ramen.", "favourite:food", "ramen"),
    ("My favorite color is Teal.", "favourite:colour", "Teal"),
    ("My new favourite band is The Weather Station.", "favourite:band", "The Weather Station"),
    ("My favourite author of all time is Ursula Le Guin.", "favourite:author", "Ursula Le Guin"),
    ("Khruangbin is still my favourite band.", "favourite:band", "Khruangbin"),
    ("koshari is my favourite food, is there a place nearby", "favourite:food", "koshari"),
    ("I don't like sushi anymore.", "preference:sushi", "dislikes"),
    ("I hate running.", "preference:running", "dislikes"),
    ("I can't stand horror movies.", "preference:horror movie", "dislikes"),
    ("I'm not a fan of cilantro.", "preference:cilantro", "dislikes"),
    ("I'm allergic to peanuts.", "allergy:peanut", "allergic"),
    ("I'm deathly allergic to shellfish and peanuts.", "allergy:shellfish", "allergic"),
    ("I have a nut allergy.", "allergy:nut", "allergic"),
    ("I'm not allergic to cats anymore.", "allergy:cat", "not allergic"),
    ("I'm vegetarian.", "diet", "vegetarian"),
    ("I went vegan last year.", "diet", "vegan"),
    ("I've been vegan since 2019.", "diet", "vegan"),
    ("I don't eat meat.", "diet", "vegetarian"),
    ("I'm on a keto diet.", "diet", "keto"),
    ("I switched to a vegetarian diet two weeks ago.", "diet", "vegetarian"),
    ("My birthday is March 3rd.", "birthday", "3 March"),
    ("My birthday is on the 14th of July.", "birthday", "14 July"),
    ("I was born on 3 March 1990.", "birthday", "3 March 1990"),
    ("My birthday is tomorrow!", "birthday", "11 May"),
    ("I'm going to Japan next month.", "plan:japan", "go to Japan in June 2024"),
    ("I'm going to visit my parents next week.", "plan:parents", "visit Ana's parents in the week of 13 May 2024"),
    ("I'm flying to Paris on June 3rd.", "plan:paris", "fly to Paris on 3 June 2024"),
    ("I'll start my new job tomorrow.", "plan:new job", "start Ana's new job on 11 May 2024"),
    ("I'm planning to run a marathon in October.", "plan:marathon", "run a marathon in October 2024"),
    ("I will finish the thesis by next month.", "plan:thesis", "finish the thesis by June 2024"),
    ("I'm moving to Berlin next month.", "plan:berlin", "move to Berlin in June 2024"),
])
def test_english_statements_give_their_fact(text: str, attribute: str, value: str) -> None:
    """Each plain first-person English statement (home, origin, employer, occupation, studies, pets, partner, family,
    likes, allergies, diet, birthday, dated plans) yields its slot with the expected normalised value."""
    assert slots(text).get(attribute) == value


@pytest.mark.parametrize(("text", "attribute", "value"), [
    ("我住在杭州。", "lives_in", "杭州"),
    ("我搬到了上海，工作很忙。", "lives_in", "上海"),
    ("我现在住在北京朝阳区。", "lives_in", "北京朝阳区"),
    ("我住在杭州已经三年了。", "lives_in", "杭州"),
    ("我来自四川。", "from", "四川"),
    ("我是北京人。", "from", "北京"),
    ("我在腾讯工作。", "works_at", "腾讯"),
    ("我在协和医院上班。", "works_at", "协和医院"),
    ("我是一名护士。", "occupation", "护士"),
    ("我是老师。", "occupation", "老师"),
    ("我的工作是程序员。", "occupation", "程序员"),
    ("我在北京大学读书。", "studies", "北京大学"),
    ("我学的是计算机专业。", "studies", "计算机"),
    ("我养了一只猫叫咪咪。", "pet:cat", "咪咪"),
    ("我的狗叫旺财，它很可爱。", "pet:dog", "旺财"),
    ("我家有一只兔子。", "pet:rabbit", "兔子"),
    ("我老婆叫小红。", "partner", "小红"),
    ("我男朋友叫阿杰。", "partner", "阿杰"),
    ("我妹妹叫小美。", "family:sister:小美", "小美"),
    ("我喜欢爬山。", "preference:爬山", "likes"),
    ("我很喜欢吃火锅。", "preference:吃火锅", "likes"),
    ("我挺喜欢猫的。", "preference:猫", "likes"),
    ("我不喜欢香菜。", "preference:香菜", "dislikes"),
    ("我讨厌下雨天。", "preference:下雨天", "dislikes"),
    ("我最喜欢的水果是芒果。", "favourite:水果", "芒果"),
    ("现在最爱的书是百年孤独。", "favourite:书", "百年孤独"),
    ("我最喜欢的乐队一直是惘闻。", "favourite:乐队", "惘闻"),
    ("我现在最喜欢的乐队换成海朋森了！", "favourite:乐队", "海朋森"),
    ("我对花生过敏。", "allergy:花生", "allergic"),
    ("我对猫毛不过敏。", "allergy:猫毛", "not allergic"),
    ("我吃素。", "diet", "素食"),
    ("我是素食者。", "diet", "素食"),
    ("我的生日是3月3日。", "birthday", "3月3日"),
    ("我的生日是十二月二十五号。", "birthday", "12月25日"),
    ("我打算下个月去日本。", "plan:日本", "2024年6月去日本"),
    ("我下周五要去上海出差。", "plan:上海", "2024年5月17日去上海出差"),
    ("我下个月会去参加婚礼。", "plan:婚礼", "2024年6月去参加婚礼"),
])
def test_chinese_statements_give_their_fact(text: str, attribute: str, value: str) -> None:
    """Each plain first-person Chinese statement yields its slot with the expected value, with a plan's relative date
    made absolute."""
    assert slots(text, "zh").get(attribute) == value


@pytest.mark.parametrize(("text", "attribute"), [
    # questions
    ("Do you live in Paris?", "lives_in"),
    ("Do you live in Paris", "lives_in"),
    ("Are you allergic to peanuts?", "allergy"),
    ("Have you moved to Lyon yet", "lives_in"),
    # hypotheticals and wishes
    ("If I moved to Berlin I'd learn German.", "lives_in"),
    ("I'd love to live in Tokyo.", "lives_in"),
    ("I want to move to Canada.", "lives_in"),
    ("I wish I had a dog named Rex.", "pet"),
    ("Maybe I'm allergic to peanuts.", "allergy"),
    ("I'd love to see another painting of yours!", "preference"),
    # negations of the pattern
    ("I don't live in London.", "lives_in"),
    ("I'm not from around here.", "from"),
    ("I never worked at Google.", "works_at"),
    ("I'm not a nurse.", "occupation"),
    # reported and other people's statements
    ("My sister lives in Madrid.", "lives_in"),
    ("You live in Madrid, right.", "lives_in"),
    ("She said I'm allergic to peanuts.", "allergy"),
    ("My friend's dog Rex is cute.", "pet"),
    # states that are over
    ("I used to live in Rome.", "lives_in"),
    ("I lived in Rome for years.", "lives_in"),
    ("I moved to Ohio when I was ten.", "lives_in"),
    ("I lost my job at Door Dash this month.", "works_at"),
    ("My husband Tom passed away last year.", "partner"),
    # objects that are not what the rule needs
    ("I love you!", "preference"),
    ("I love it.", "preference"),
    ("I love that you chose pottery.", "preference"),
    ("I love how art lets us get our emotions out.", "preference"),
    ("I love to.", "preference"),
    ("I love running my own studio.", "preference"),
    ("I love all the yellow leaves.", "preference"),
    ("Doing something I love is awesome.", "preference"),
    ("I love working with kids.", "preference"),
    ("I'm passionate about creating a safe, inviting place.", "preference"),
    ("I love Caroline's idea.", "preference"),
    ("I love love love this.", "preference"),
    ("I'm moving to Berlin next month.", "lives_in"),
    ("I'm a big fan.", "occupation"),
    ("I'm a good cook.", "occupation"),
    ("I'm a teacher's aide.", "occupation"),
    ("I'm a dancer at heart.", "occupation"),
    ("I'm in Paris this week.", "lives_in"),
    ("I work at home on Fridays.", "works_at"),
    ("I work from home.", "works_at"),
    ("I moved to a new apartment.", "lives_in"),
    ("I study hard every night.", "studies"),
    ("I'm studying for my exams.", "studies"),
    ("I have a dog walker.", "pet"),
    ("I have a dog in my dreams.", "pet"),
    ("My dog is sick.", "pet"),
    ("I'm allergic to something in this room.", "allergy"),
    ("I love vegan food.", "diet"),
    ("My daughter's birthday is March 3rd.", "birthday"),
    ("My birthday was last week.", "birthday"),
    ("My husband and I went out.", "partner"),
    ("Her favourite band is Tame Impala.", "favourite"),
    ("Fontaines D.C. is her favourite band.", "favourite"),
    ("This is my favourite dish.", "favourite"),
    ("My favourite band's new album is out.", "favourite"),
    ("If Wet Leg is my favourite band, what else would I like?", "favourite"),
    ("Once Wet Leg is my favourite band I'll buy the vinyl.", "favourite"),
    ("Mia says Wet Leg is my favourite band.", "favourite"),
    ("Nothing is my favourite food.", "favourite"),
    ("Wet Leg is my favourite band no more.", "favourite"),
    ("Jo is my favourite band's drummer.", "favourite"),
    ("My favourite band is probably Wet Leg.", "favourite"),
    ("Assuming I live in Berlin, what would change?", "lives_in"),
    ("Hypothetically I moved to Berlin, what would change?", "lives_in"),
    # plans need a time that is not past
    ("I'm going to keep painting.", "plan"),
    ("I'm going to Japan someday.", "plan"),
    ("I'll tell you tomorrow.", "plan"),
    ("I'm going to be busy next week.", "plan"),
    ("I went to Japan last month.", "plan"),
    ("I'm going to see you next week.", "plan"),
    ("I'll send you the pics tomorrow.", "plan"),
    ("If I win, I'm going to Japan next month.", "plan"),
])
def test_english_look_alikes_give_no_fact(text: str, attribute: str) -> None:
    """English questions, hypotheticals, negations, other people's statements, past states, objects a rule cannot use
    and plans without a future time give no fact of the attribute they resemble."""
    assert not [a for a in slots(text) if a.split(":")[0] == attribute]


@pytest.mark.parametrize(("text", "attribute"), [
    ("你住在哪里？", "lives_in"),
    ("你喜欢爬山吗？", "preference"),
    ("我想搬到上海。", "lives_in"),
    ("如果我住在上海就好了。", "lives_in"),
    ("我以前住在北京。", "lives_in"),
    ("以前我住在北京。", "lives_in"),
    ("我住在北京的时候很开心。", "lives_in"),
    ("我妹妹住在上海。", "lives_in"),
    ("我住在一个小镇。", "lives_in"),
    ("我不住在北京。", "lives_in"),
    ("我是年轻人。", "from"),
    ("我是外国人。", "from"),
    ("我在家工作。", "works_at"),
    ("我在努力工作。", "works_at"),
    ("我在一家医院上班。", "works_at"),
    ("我在北京工作。", "works_at"),
    ("我是老师的女儿。", "occupation"),
    ("我是学生会的。", "occupation"),
    ("我在家读书。", "studies"),
    ("我在图书馆读书。", "studies"),
    ("我养了一只猫头鹰。", "pet"),
    ("我妈妈叫我回家吃饭。", "family"),
    ("我老公叫我早点睡。", "partner"),
    ("我爱你。", "preference"),
    ("我喜欢他。", "preference"),
    ("我喜欢这个。", "preference"),
    ("我喜欢你的画。", "preference"),
    ("我喜欢中国的文化。", "preference"),
    ("我爱上了一个人。", "preference"),
    ("我想喜欢运动。", "preference"),
    ("我对什么过敏？", "allergy"),
    ("我吃素菜。", "diet"),
    ("我今天不吃肉。", "diet"),
    ("我有狗粮。", "pet"),
    ("我先生叫我别担心。", "partner"),
    ("阿梅说她现在最喜欢的剧变成狂飙了。", "favourite"),
    ("现在最喜欢的歌手就是他。", "favourite"),
    ("以前我最喜欢的乐队是五月天。", "favourite"),
    ("我女儿今年三岁，最喜欢的动画片是小猪佩奇。", "favourite"),
    ("我妹 最喜欢的乐队是五月天", "favourite"),
    ("最喜欢的乐队是谁来着", "favourite"),
    ("我最喜欢的菜不是火锅。", "favourite"),
    ("我最喜欢的书可能是百年孤独。", "favourite"),
    ("我男朋友说 我最喜欢的乐队是惘闻", "favourite"),
    ("如果 我搬到上海 你觉得怎么样", "lives_in"),
    ("以前 我住在北京 现在不是了", "lives_in"),
    ("我想下个月去日本。", "plan"),
    ("我打算去日本。", "plan"),
    ("我不打算下个月去日本。", "plan"),
    ("我上个月要去日本。", "plan"),
])
def test_chinese_look_alikes_give_no_fact(text: str, attribute: str) -> None:
    """Chinese questions, wishes, past states, other people's statements, vague places or objects and plans without a
    future time give no fact of the attribute they resemble."""
    assert not [a for a in slots(text, "zh") if a.split(":")[0] == attribute]


def test_a_fact_draft_is_dated_self_contained_and_slotted() -> None:
    """A fact draft names the speaker and the day it was stated, and carries a slot keyed by subject and attribute, its
    source turn and time, persons, entities, keywords and the attribute's importance."""
    turn = make_turn("Guess what, I've just moved to Porto!", speaker="Ana", ts=FRIDAY)
    [draft] = facts_in_turn(turn, "en")
    assert draft.kind == "fact"
    assert draft.text == "Ana lives in Porto (stated 10 May 2024)"
    assert draft.slot is not None and draft.slot.subject == "Ana" and draft.slot.value == "Porto"
    assert draft.slot.key == "ana\x1flives_in"
    assert draft.source_turn_ids == [turn.turn_id]
    assert draft.occurred_at == turn.ts
    assert draft.persons == ["Ana"]
    assert draft.entities == ["Porto"]
    assert "porto" in draft.keywords
    assert draft.importance == 0.8


def test_people_in_a_fact_are_persons_and_entities() -> None:
    """A relative named in a family fact is written into the fact and listed among its persons and entities."""
    [draft] = facts_in_turn(make_turn("My sister Maria is visiting.", speaker="Ana", ts=FRIDAY), "en")
    assert draft.text == "Ana's sister is Maria (stated 10 May 2024)"
    assert draft.persons == ["Ana", "Maria"]
    assert draft.entities == ["Maria"]


@pytest.mark.parametrize(("text", "importance"), [
    ("I'm allergic to peanuts.", 0.8), ("I love hiking.", 0.7), ("I have a dog named Rex.", 0.7),
    ("I'm going to Japan next month.", 0.75),
])
def test_importance_follows_the_attribute(text: str, importance: float) -> None:
    """A fact's importance depends on its attribute: allergies above plans, and plans above preferences and pets."""
    [draft] = facts_in_turn(make_turn(text, ts=FRIDAY), "en")
    assert draft.importance == importance


def test_statements_name_the_speaker_instead_of_pronouns() -> None:
    """Fact texts replace the speaker's 'I' and 'my' with their name, in negated allergies, dislikes and plans alike."""
    assert texts("I'm not allergic to peanuts anymore.") == ["Ana is not allergic to peanuts (stated 10 May 2024)"]
    assert texts("I don't like sushi.") == ["Ana dislikes sushi (stated 10 May 2024)"]
    assert texts("I'm going to visit my parents next week.") == [
        "Ana plans to visit Ana's parents in the week of 13 May 2024 (stated 10 May 2024)"]


@pytest.mark.parametrize("text", ["I'll make some tonight.", "I'm going to buy more next week.",
                                  "I'll bake another tomorrow!"])
def test_a_quantity_without_a_noun_is_no_plan(text: str) -> None:
    """"I'll make some tonight" says how much, not what: nothing to file as a plan ("some cookies" is one)."""
    assert texts(text) == []
    assert texts(text.replace("some", "some cookies").replace("more", "more paint").replace("another", "another loaf")
                 ) != []


def test_a_question_hides_no_statement_told_before_it_in_the_same_sentence() -> None:
    """"I just moved to Porto, any tips for a dentist?" tells before it asks; a question throughout gives nothing."""
    assert slots("I just moved to Porto, any tips for finding a dentist?") == {"lives_in": "Porto"}
    assert slots("my hamster Nibbles keeps chewing the bars - is he bored?") == {"pet:hamster": "Nibbles"}
    assert slots("Do you live in Paris, or is it Lyon?") == {}
    assert slots("Have you moved to Lyon, and do you like it?") == {}


def test_a_chinese_question_hides_no_statement_in_another_clause_of_its_message() -> None:
    """Chat separates clauses with spaces: the question in "... 他们今年有演出吗" is its own clause, so the statement
    before it is read; the question itself still gives nothing."""
    assert slots("最喜欢的乐队是惘闻 没有之一 他们今年在大连有演出吗 我就在大连", "zh") == {"favourite:乐队": "惘闻"}
    assert slots("你最喜欢的乐队是谁 我最喜欢的乐队是什么", "zh") == {}


def test_chinese_statements_carry_a_chinese_date() -> None:
    """Chinese facts name the speaker and end with the day they were stated, in Chinese."""
    assert texts("我住在杭州。", "zh") == ["Ana住在杭州（2024年5月10日所述）"]
    assert texts("我养了一只猫叫咪咪。", "zh") == ["Ana养了一只猫，名叫咪咪（2024年5月10日所述）"]


def test_one_fact_per_slot_per_turn() -> None:
    """A turn that states the same preference twice yields one fact for that slot, beside its other facts."""
    drafts = facts_in_turn(make_turn("I love hiking. I really love hiking! I also enjoy painting.", ts=FRIDAY), "en")
    assert sorted(d.slot.attribute for d in drafts if d.slot) == ["preference:hiking", "preference:painting"]


def test_a_favourite_is_one_slot_per_kind_and_a_liking_one_per_object() -> None:
    """A person has one favourite band at a time, so favourites share their kind's slot (where the slot rules let a
    newer one supersede the older); likings keep a slot per thing liked."""
    assert slots("My favourite band is Altin Gün.") == {"favourite:band": "Altin Gün"}
    assert slots("My favourite band is Mdou Moctar these days.") == {"favourite:band": "Mdou Moctar"}
    assert slots("I love Altin Gün. I also love Mdou Moctar.") == {"preference:altin gün": "likes",
                                                                   "preference:mdou moctar": "likes"}


def test_objects_keep_their_own_slots() -> None:
    """Each object of one statement gets its own slot, and an unrelated clause adds none."""
    found = slots("I'm allergic to peanuts and shellfish, so I cook at home.")
    assert found == {"allergy:peanut": "allergic", "allergy:shellfish": "allergic"}


@pytest.mark.parametrize("role", ["assistant", "system"])
def test_only_people_state_facts(role: str) -> None:
    """Assistant and system turns yield no facts, whatever they say."""
    turn = make_turn("I live in Porto.", ts=FRIDAY).model_copy(update={"role": role})
    assert facts_in_turn(turn, "en") == []


def test_other_speakers_state_facts_too() -> None:
    """A turn with the 'other' role yields facts about its own speaker."""
    turn = make_turn("I live in Porto.", speaker="Bo", ts=FRIDAY).model_copy(update={"role": "other"})
    assert [d.text for d in facts_in_turn(turn, "en")] == ["Bo lives in Porto (stated 10 May 2024)"]


def test_a_language_without_rules_gives_nothing() -> None:
    """A turn in a language that has no rules yields no facts."""
    assert facts_in_turn(make_turn("J'habite à Paris.", ts=FRIDAY), "fr") == []


async def test_the_extractor_reads_each_turn_of_the_window_in_its_language() -> None:
    """The extractor reads each of a window's turns in its own language and yields their facts in order, each with its
    source turn and none from the context; sync and async give the same drafts."""
    context = make_turn("I live in Rome.", speaker="Ana", ts=FRIDAY)
    turns = [make_turn("我住在杭州，我在腾讯工作。", speaker="小王", ts=FRIDAY),
             make_turn("我对花生过敏。", speaker="小王", ts=FRIDAY)]
    window = Window(tenant_id="t", conversation_id="c1", turns=turns, context=[context])
    drafts = await RuleFactExtractor().extract(window)
    assert [d.text for d in drafts] == ["小王住在杭州（2024年5月10日所述）", "小王在腾讯工作（2024年5月10日所述）",
                                        "小王对花生过敏（2024年5月10日所述）"]
    assert [d.source_turn_ids for d in drafts] == [[turns[0].turn_id], [turns[0].turn_id], [turns[1].turn_id]]
    assert RuleFactExtractor().extract_sync(window) == drafts


@pytest.mark.parametrize(("text", "lang", "attribute", "value"), [
    ("Lisa and I broke up in July.", "en", "partner", "no partner"),
    ("Lisa and I broke up in July. I've been seeing Jana since September.", "en", "partner", "Jana"),
    ("my new boyfriend Tariq cooks", "en", "partner", "Tariq"),
    ("I'm no longer vegetarian.", "en", "diet", "not vegetarian"),
    ("I'm not vegan anymore", "en", "diet", "not vegan"),
    ("I gave up being vegetarian after the trip", "en", "diet", "not vegetarian"),
    ("I started eating meat again", "en", "diet", "eats meat"),
    ("I handed in my notice at Siemens today", "en", "works_at", "left Siemens"),
    ("I handed in my notice at Siemens and start at Bosch on Monday", "en", "works_at", "Bosch"),
    ("first week at Kyocera done!", "en", "works_at", "Kyocera"),
    ("我和小李分手了", "zh", "partner", "no partner"),
    ("我不吃素了，昨天吃了牛排", "zh", "diet", "不吃素"),
    ("跟你说，我已经递了辞呈，下周一去米哈游报到", "zh", "works_at", "米哈游"),
    ("我已经离职了", "zh", "works_at", "已离职"),
])
def test_a_change_said_in_passing_is_a_fact_of_its_slot(text: str, lang: str, attribute: str, value: str) -> None:
    """Endings and new starts ("broke up", "no longer vegetarian", "去米哈游报到") state the slot's new value; the
    last one a turn says wins."""
    assert slots(text, lang).get(attribute) == value


@pytest.mark.parametrize(("text", "lang", "ends"), [
    ("Lisa and I broke up in July.", "en", True),
    ("I'm no longer vegetarian.", "en", True),
    ("I handed in my notice at Siemens today", "en", True),
    ("我和小李分手了", "zh", True),
    ("我不吃素了，昨天吃了牛排", "zh", True),
    ("我已经离职了", "zh", True),
    ("I started eating meat again", "en", False),
    ("I'm not allergic to peanuts.", "en", False),
    ("my new boyfriend Tariq cooks", "en", False),
    ("I live in Porto.", "en", False),
])
def test_an_ending_says_what_no_longer_holds(text: str, lang: str, ends: bool) -> None:
    """A fact that a slot's value stopped ("broke up", "no longer vegetarian", "离职了") is an ending, which a
    profile of current facts leaves out; a new value, or a state that happens to be negative ("not allergic"), is
    not."""
    drafts = [d for d in facts_in_turn(make_turn(text, speaker="Ana", ts=FRIDAY), lang) if d.slot]
    assert drafts and any(changes.ending(d.slot.attribute, d.slot.value) for d in drafts if d.slot) == ends


@pytest.mark.parametrize(("text", "lang"), [
    ("If Lisa and I broke up I'd cry", "en"),
    ("My sister broke up with Tom", "en"),
    ("Is he no longer vegetarian?", "en"),
    ("入职俩多月了，食堂是真不错", "zh"),
    ("她和男朋友分手了", "zh"),
    ("明天去学校报到", "zh"),
    ("We split up at the mall", "en"),
    ("Tom and I split up the work", "en"),
    ("I'm seeing Anna for lunch tomorrow", "en"),
    ("My new partner Steve and I opened a bakery", "en"),
    ("My brother will quit and start at Google", "en"),
    ("Her first day at Google", "en"),
    ("I gave my notice to Michael", "en"),
    ("I'm not vegan", "en"),
    ("吃完饭我们分开了", "zh"),
    ("我弟弟下周去腾讯报到", "zh"),
    ("他在字节入职了", "zh"),
])
def test_what_only_looks_like_a_change_is_no_fact(text: str, lang: str) -> None:
    """Suppositions, other people's breakups, questions and time spans after 入职 are not the speaker's facts."""
    assert not {a for a in slots(text, lang) if a in ("partner", "diet", "works_at")}


@pytest.mark.parametrize(("text", "attribute", "value"), [
    ("I just moved to Wrocław last month", "lives_in", "Wrocław"),
    ("I live in Łódź now", "lives_in", "Łódź"),
    ("I work at Škoda now", "works_at", "Škoda"),
    ("my sister Inés is visiting", "family:sister:inés", "Inés"),
])
def test_names_keep_their_accented_letters(text: str, attribute: str, value: str) -> None:
    """A name with letters beyond ASCII is stated whole, never cut at its first accent ("Wroc" for "Wrocław")."""
    assert slots(text).get(attribute) == value
