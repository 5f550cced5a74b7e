"""Where an epoch key maker keeps its two markers of a length (keys/epochs/keys.py, ``EpochKeys.__init__``;
threat_model.md, "Expiry epochs"): both in the epoch keys' service, "destroyed through" held below an epoch whose
entry the keyring refuses to delete, "probed through" beside it moving on. A cursor written as the marker would
say the stuck entry's epoch was destroyed; one written elsewhere is never read back, so later epochs' names are
probed again and again. Through a real store."""

from __future__ import annotations

from tests.keys.test_epoch_keys import END, EPOCH, NUMBER, SERVICE, SKEW, E, FaultyKeyring, epochs_of


def test_a_stuck_delete_holds_the_marker_below_its_epoch_and_the_cursor_goes_on_in_the_same_service(stores):
    ring = FaultyKeyring()
    epochs = epochs_of(stores(), ring)
    epochs.get_or_create(EPOCH, END - 10)
    ring.refuse_deletes = True
    assert epochs.destroy_ended(END + SKEW).pending == [(E, NUMBER, 1)]
    assert {key: secret for key, secret in ring.secrets.items() if key[1].endswith("-through")} == {
        (SERVICE, f"{E}.destroyed-through"): str(NUMBER - 1),
        (SERVICE, f"{E}.probed-through"): str(NUMBER),
        (SERVICE, f"{E}.made-through"): str(NUMBER),
    }
