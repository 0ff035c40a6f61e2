"""Reading a query: the names it could mean, matched exactly against entries' `persons` in the store."""
from shared.retrieval.plan import query_names


def test_names_are_spelled_every_way_an_entry_could_store_them() -> None:
    """A query's names are offered in their own and other casings, multi-word names whole, and without a possessive
    's."""
    names = query_names("what did melanie's friend Mary Ann do?")
    assert {"melanie", "Melanie", "Mary Ann", "mary ann", "friend"} <= set(names)
    assert "Melanie's" not in names and "melanie's" not in names  # the possessive is not part of the name


def test_lone_stopwords_and_single_letters_are_no_names() -> None:
    """Stopwords and single letters in a query are not offered as names."""
    names = set(query_names("What is a w for?"))
    assert not names & {"What", "what", "is", "a", "w", "for"}


def test_names_inside_unspaced_chinese_text_are_found() -> None:
    """Words of an unspaced Chinese query, the person's name among them, are offered as names."""
    names = query_names("李雷上周去了哪里")
    assert "李雷" in names and "上周" in names
