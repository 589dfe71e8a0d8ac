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


def test_value_counts_give_numpys_quartiles_and_mean_to_the_bit():
    """A pipeline sums a split's values shard by shard as counts (`ValueCounts`): the
    distribution must be the one NumPy gives over every value (ints as image sides and
    sizes, floats as box sizes), also once copies are taken out."""
    import numpy as np

    from tfrecorder.write.statistics import ValueCounts

    def numpys(values, digits=None):
        q1, median, q3 = np.percentile(values, [25, 50, 75]).tolist()
        if digits is None:
            return (int(values.min()), q1, median, q3, int(values.max()),
                    round(float(values.mean()), 2))
        return tuple(round(float(v), digits) for v in (
            values.min(), q1, median, q3, values.max(), values.mean()))

    rng = np.random.default_rng(7)
    for trial in range(400):
        n = int(rng.integers(1, 60))
        values = (rng.integers(1, 40, n).astype(np.int32) if trial % 2
                  else np.sqrt(rng.random(n, dtype=np.float32).astype(np.float64)))
        cuts = np.sort(rng.integers(0, n + 1, 2))
        counts = sum((ValueCounts.of(part) for part in np.split(values, cuts)),
                     ValueCounts())
        digits = None if trial % 2 else 4
        found = counts.distribution(digits)
        assert (found.min, found.q1, found.median, found.q3, found.max, found.mean) == \
            numpys(values, digits), trial
        unrounded = counts.distribution()  # (floats' quartiles, to the last bit)
        assert [unrounded.q1, unrounded.median, unrounded.q3] == \
            np.percentile(values, [25, 50, 75]).tolist(), trial
        if n > 1:  # a dropped copy taken out
            less = (counts - ValueCounts.of(values[:1])).distribution(digits)
            assert less == ValueCounts.of(values[1:]).distribution(digits)
