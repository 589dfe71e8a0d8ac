"""A split's statistics are the same whichever form its shards' labels are held in."""

import json

from tfrecorder.write.statistics import RecordLabels, ShardFacts, split_statistics


def facts_of(labels: list) -> ShardFacts:
    facts = ShardFacts()
    facts.add_without_images(list(range(len(labels))), labels)
    return facts


def test_class_counts_of_ids_and_of_lists_agree():
    ids = [facts_of([2, None, 0, 2]), facts_of([None, 5]), facts_of([])]
    found = split_statistics(ids, num_classes=4)
    assert found.class_counts == (1, 0, 2, 0, 0, 1) and found.unlabeled == 2
    as_lists = [facts_of([[2], None, [0], [2]]), facts_of([None, [5]]), facts_of([])]
    assert split_statistics(as_lists, num_classes=4) == found


def test_labels_read_back_as_written():
    labels = RecordLabels([3, None, 0])
    assert labels.tolist() == list(labels) == [3, None, 0]
    assert labels.ids().tolist() == [3, -1, 0]
    labels.append([1, 2])  # multi-label: a list from here on
    assert labels.tolist() == [3, None, 0, [1, 2]] and labels.ids() is None


def test_receipts_give_back_the_labels():
    for labels in ([3, None, 0], [[1, 2], None, [0]], []):
        facts = facts_of(labels)
        receipt = json.loads(json.dumps(facts.to_json()))
        assert ShardFacts.from_json(receipt) == facts
        assert ShardFacts.from_json(receipt).labels.tolist() == labels
    before_ids = {k: v for k, v in facts_of([3, None]).to_json().items() if k != "label_ids"}
    assert ShardFacts.from_json({**before_ids, "labels": [3, None]}) == facts_of([3, None])
