"""The root's explanation says why the alert that fired first is not the root."""

from __future__ import annotations

from correlate.batch import correlate
from correlate.testing import make_alert

POD = {"cluster": "c1", "namespace": "chat", "pod": "chat-7d9f8b6c4-x2k9p", "model_name": "chat-13b"}


def test_an_effect_that_fired_first_is_named_with_the_onset_that_put_it_after_the_root():
    # The fragmentation rule holds 15 minutes: it fires at 03:14 for a condition from 02:59;
    # the OOM kill fires at 03:05 at once.
    frag = make_alert("VLLMKVCacheFragmentationHigh", "03:14", annotations={"description": "for 15m"}, **POD)
    oom = make_alert("KubePodOOMKilled", "03:05", **POD)
    [incident] = correlate([frag, oom])
    assert incident.root is not None and incident.root.alert_key == frag.key
    text = incident.root.explanation
    assert "KubePodOOMKilled fired first (at 03:05), but its condition began at 03:05" in text
    assert "after VLLMKVCacheFragmentationHigh's (from 02:59: its rule holds 15 min)" in text


def test_nothing_is_said_when_the_root_fired_first():
    frag = make_alert("VLLMKVCacheFragmentationHigh", "03:00", **POD)
    oom = make_alert("KubePodOOMKilled", "03:05", **POD)
    [incident] = correlate([frag, oom])
    assert incident.root is not None and incident.root.alert_key == frag.key
    assert "fired first" not in incident.root.explanation
