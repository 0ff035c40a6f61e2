"""Reading a query: the names it could mean, matched exactly against entries' `persons` in the store."""
from shared.retrieval.plan import query_names


def test_names_are_spelled_every_way_an_entry_could_store_them() -> None:
    names = query_names("what did melanie's friend Mary Ann do?")
    assert {"melanie", "Melanie", "Mary Ann", "mary ann", "friend"} <= set(names)
    assert "Melanie's" not in names and "melanie's" not in names  # the possessive is not part of the name


def test_lone_stopwords_and_single_letters_are_no_names() -> None:
    names = set(query_names("What is a w for?"))
    assert not names & {"What", "what", "is", "a", "w", "for"}


def test_names_inside_unspaced_chinese_text_are_found() -> None:
    names = query_names("李雷上周去了哪里")
    assert "李雷" in names and "上周" in names
