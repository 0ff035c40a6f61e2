"""Recall through NATS has to rank: one tenant holds forty stored conversations on different subjects, and each
question must bring its own conversation first."""
from engram_client import MemoryClient, wait_until_stored
from services.stack import Running
from tests.support.turns import conversation

FACTS = [
    ("I started learning the cello last month with a teacher called Marta.",
     "Which musical instrument did I start learning?"),
    ("My sister Lucia moved to Madrid to work as an architect.", "Where does the architect sister live?"),
    ("Our cat Pixel had surgery on her paw on Tuesday.", "What happened to the cat's paw?"),
    ("I am allergic to peanuts, so I always carry an epinephrine pen.", "Which food am I allergic to?"),
    ("We are planning a road trip through Norway's fjords in August.", "Where is the summer road trip going?"),
    ("My favourite dish is my grandmother's mushroom risotto.", "What is the favourite meal?"),
    ("I finished my first marathon in Berlin in three hours fifty.", "How long did the marathon take?"),
    ("The kitchen renovation is done; we chose dark green tiles.", "What colour are the new kitchen tiles?"),
    ("I switched jobs and now work as a data engineer at a bank.", "What is the new job?"),
    ("My son Theo lost his first tooth at school today.", "Which milestone did Theo reach?"),
    ("I've been reading Dune and I'm halfway through the second book.", "Which novel series is being read?"),
    ("Our book club meets every second Thursday at the library café.", "When does the book club meet?"),
    ("I planted tomatoes, basil and chillies on the balcony.", "What is growing on the balcony?"),
    ("My car broke down on the motorway and needed a new alternator.", "What part did the car need?"),
    ("I adopted a rescue greyhound named Comet last weekend.", "What kind of dog was adopted?"),
    ("I'm training to get my scuba diving certificate in Malta.", "Where is the diving course?"),
    ("My flat's heating failed, so the landlord sent a plumber.", "Why did a plumber come?"),
    ("I volunteer at the food bank on Saturday mornings.", "Where is the volunteering done?"),
    ("We celebrated our tenth wedding anniversary in Kyoto.", "Where was the anniversary celebrated?"),
    ("I'm learning Japanese and passed the JLPT N4 exam.", "Which language exam was passed?"),
    ("My doctor told me to cut down on coffee because of my heart rate.", "Why should coffee be reduced?"),
    ("The startup I joined raised a series A from two investors.", "Which funding round did the startup raise?"),
    ("I broke my wrist skateboarding and wear a cast for six weeks.", "How was the wrist injured?"),
    ("My brother Jonas is getting married to Amira in October.", "Who is Jonas marrying?"),
    ("I bought a second-hand road bike, a blue steel Bianchi.", "What bike was bought?"),
    ("We switched to a vegetarian diet at home this year.", "What diet does the household follow?"),
    ("I'm writing a thesis on coral reef bleaching in Belize.", "What is the thesis about?"),
    ("My daughter started violin lessons on Wednesdays.", "Which lessons does the daughter take?"),
    ("I lost my passport in Lisbon and got an emergency one at the embassy.", "What happened to the passport?"),
    ("Our team won the pub quiz thanks to a question about volcanoes.", "How was the pub quiz won?"),
    ("I moved my savings into index funds after reading about fees.", "Where did the savings go?"),
    ("My grandfather turned ninety and we threw him a jazz party.", "How old did the grandfather turn?"),
    ("I've started climbing at the bouldering gym twice a week.", "Which sport is practised at the gym?"),
    ("I'm knitting a yellow scarf for my niece's birthday.", "What is being knitted?"),
    ("The river flooded our street and the basement filled with water.", "What damaged the basement?"),
    ("I got promoted to team lead and now manage five people.", "How many people are managed?"),
    ("We hosted an exchange student from Brazil named Rafael.", "Who was the exchange student?"),
    ("I quit smoking three months ago using nicotine patches.", "How did the smoking stop?"),
    ("My phone screen cracked when it fell in the supermarket.", "Where did the phone fall?"),
    ("I bake sourdough bread every Sunday with a starter called Bubbles.", "What is the starter called?"),
]


async def test_each_question_brings_its_own_conversation_first_among_forty(stack: Running,
                                                                           client: MemoryClient) -> None:
    """Among forty stored conversations of one user, each question ranks its own conversation first in a recall of
    five."""
    turns = []
    for i, (fact, _) in enumerate(FACTS):
        turns += conversation([("Sam", fact), ("Coach", "Thanks for telling me.")], conversation_id=f"fact-{i}",
                              user_id="sam")
    await client.publish_turns(turns)
    for i in range(len(FACTS)):
        await client.flush(f"fact-{i}")
    await wait_until_stored(client, turns, timeout_s=120)
    first = []
    for i, (_, question) in enumerate(FACTS):
        reply = await client.recall(question, user_id="sam", k=5)
        assert len(reply.entries) == 5  # ranking among many, not the only entry there is
        ranked = [e.conversation_id for e in reply.entries]
        assert f"fact-{i}" in ranked[:3], (question, ranked)
        first.append(ranked[0] == f"fact-{i}")
    assert sum(first) == len(FACTS), [FACTS[i][1] for i, hit in enumerate(first) if not hit]
