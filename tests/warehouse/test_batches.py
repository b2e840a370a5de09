from findings_provider.warehouse.batches import IN_LIST_BATCH, id_batches


def test_ids_come_distinct_ascending_and_bounded():
    ids = [*range(1200, 0, -1), 7, "8", 1200]
    batches = list(id_batches(ids))
    assert [len(b) for b in batches] == [IN_LIST_BATCH, IN_LIST_BATCH, 200]
    assert [i for b in batches for i in b] == list(range(1, 1201))
    assert list(id_batches([], size=3)) == []
    assert list(id_batches(["3", 1, 2, 2], size=2)) == [[1, 2], [3]]
