"""Offline, rule-based facts: first-person statements a speaker makes about themself, as slotted drafts.

Only plain statements count: a question, a supposition or wish ("if I moved to", "I'd love to live in", 如果/想),
a negation of the pattern, someone else's statement ("my sister lives in") and a state marked as over ("I used to
live in", 以前住在) give nothing. A wrong fact is worse than a missing one, so every object must also have the
right shape (a capitalised place, a whitelisted occupation, a short noun phrase).

The attribute vocabulary (`Slot.attribute`; `<object>` is lower case, without articles or punctuation):

- `lives_in`: the place ("I've just moved to Lisbon", 我住在杭州).
- `from`: the place of origin ("I grew up in Ohio", 我是四川人).
- `works_at`: the employer ("I work at Google", 我在腾讯工作).
- `occupation`: a whitelisted occupation ("I'm a nurse", 我是一名老师).
- `studies`: the subject, "at <school>" when named, or the school ("I'm studying law at UCL", 我在北京大学读书).
- `pet:<species>`: the pet's name, else its species ("I have a dog named Rex", 我的猫叫咪咪).
- `partner`: a name ("my wife Jo", 我老公叫大伟).
- `family:<relation>:<name>`: the name; relation is sister, brother, son, daughter, mother or father, and the name
  is in the key because people have several siblings ("my sister Maria", 我妹妹叫小美).
- `preference:<object>`: "likes" or "dislikes" ("I love hiking", 我不喜欢香菜).
- `favourite:<kind>`: the favourite of that kind, one at a time ("my favourite food is ramen", 我最喜欢的乐队是草东).
- `allergy:<object>`: "allergic" or "not allergic" ("I'm allergic to peanuts", 我对花生过敏).
- `diet`: vegetarian, vegan, pescatarian, gluten-free, keto, halal, kosher; 素食, 纯素 ("I went vegan", 我吃素).
- `birthday`: "3 March" (with the year when given) or "3月3日" ("my birthday is March 3rd").
- `plan:<object>`: what and when, the date absolute ("I'm going to Japan next month" said in May 2024 ->
  "go to Japan in June 2024"); a plan whose time does not resolve to a date not yet past is left out.
"""
from shared.compress.facts.extractor import RuleFactExtractor, facts_in_turn

__all__ = ["RuleFactExtractor", "facts_in_turn"]
