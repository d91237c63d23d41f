from vramtune.records import Status, TrialResult
from vramtune.tune.capacity import CAPACITY_MARGIN, warp_capacities


def warp_trial(**warp) -> TrialResult:
    return TrialResult(status=Status.OK, profile="cup", profile_hash="0" * 16, num_envs=64,
                       **{"warp_naconmax": 10_000, "warp_njmax": 25, **warp})


def test_capacities_are_the_demand_seen_times_the_margin():
    (contacts, rows) = warp_capacities(warp_trial(warp_contacts_max=301,
                                                  warp_constraint_rows_per_world_max=9), {})
    assert (contacts.key, contacts.value, contacts.demand, contacts.ran_with) == \
        ("naconmax", 452, 301, 10_000)
    assert (rows.key, rows.value) == ("njmax", 14)
    assert CAPACITY_MARGIN == 1.5
    assert contacts.words == ("naconmax 452: 301 contacts for all worlds seen x 1.5 margin; the "
                              "trial ran with 10,000")


def test_no_demand_seen_keeps_what_the_trial_ran_with():
    (contacts, rows) = warp_capacities(warp_trial(warp_contacts_max=0,
                                                  warp_constraint_rows_per_world_max=1), {})
    assert contacts.value == 10_000 and "no contacts for all worlds seen" not in contacts.words
    assert contacts.words.startswith("naconmax 10,000: the trial's, kept (no contacts")
    assert rows.value == 2  # ceil(1 x 1.5)


def test_a_capacity_the_user_set_is_kept():
    (contacts, rows) = warp_capacities(warp_trial(warp_contacts_max=50, warp_njmax=12,
                                                  warp_constraint_rows_per_world_max=11),
                                       {"njmax": 12})
    assert rows.value == 12 and rows.user_set and rows.words == \
        "njmax 12: yours, kept (11 constraint rows in the fullest world seen)"
    assert contacts.value == 75 and not contacts.user_set


def test_never_more_than_the_trial_ran_with():
    # 20 rows seen under njmax 20: x 1.5 would ask for memory the trial never held
    (_, rows) = warp_capacities(warp_trial(warp_contacts_max=5, warp_njmax=20,
                                           warp_constraint_rows_per_world_max=20), {})
    assert rows.value == 20
    assert rows.words == ("njmax 20: what the trial ran with, above the 20 constraint rows in "
                          "the fullest world seen (x 1.5 would be 30, more than measured)")


def test_an_overflowed_or_damaged_pick_has_no_capacities_to_emit():
    assert warp_capacities(warp_trial(warp_contacts_max=5, warp_overflow=["NEFC"]), {}) == ()
    assert warp_capacities(warp_trial(warp_naconmax=-1), {}) == ()
    assert warp_capacities(warp_trial(warp_njmax=10**20), {}) == ()


def test_a_trial_that_did_not_step_warp_has_no_capacities():
    assert warp_capacities(TrialResult(status=Status.OK, profile="q", profile_hash="0" * 16,
                                       num_envs=64), {}) == ()


def test_the_sweep_sizes_a_trial_from_the_demand_per_env_its_earlier_trials_saw():
    from vramtune.tune.capacity import sweep_capacities

    assert sweep_capacities([], 64, {}) == ()
    results = [warp_trial(warp_contacts_max=40, warp_constraint_rows_per_world_max=9),  # 64
               TrialResult(status=Status.OK, profile="cup", profile_hash="0" * 16, num_envs=128,
                           warp_naconmax=1, warp_njmax=1, warp_contacts_max=60,
                           warp_constraint_rows_per_world_max=12)]
    # 40 / 64 = 0.625 contacts per env is the most; 12 rows in the fullest world
    assert sweep_capacities(results, 256, {}) == (("naconmax", 240), ("njmax", 18))
    assert sweep_capacities(results, 256, {"njmax": 30}) == (("naconmax", 240),)
    none_seen = [warp_trial(warp_contacts_max=0, warp_constraint_rows_per_world_max=0)]
    assert sweep_capacities(none_seen, 256, {}) == ()


def test_a_damaged_record_s_negative_demand_is_no_demand():
    (contacts, rows) = warp_capacities(warp_trial(warp_contacts_max=-7,
                                                  warp_constraint_rows_per_world_max=None), {})
    assert (contacts.value, rows.value) == (10_000, 25)


def test_the_sweep_leaves_out_overflowed_and_damaged_records():
    from vramtune.tune.capacity import sweep_capacities

    sane = warp_trial(warp_contacts_max=40, warp_constraint_rows_per_world_max=9)  # 64 envs
    sank = TrialResult(status=Status.OVERFLOW, profile="cup", profile_hash="0" * 16,
                       num_envs=64, warp_naconmax=20, warp_njmax=7, warp_contacts_max=400,
                       warp_constraint_rows_per_world_max=74, warp_overflow=["NEFC"])
    huge = warp_trial(warp_contacts_max=10**20, warp_constraint_rows_per_world_max=-3)
    assert sweep_capacities([sane, sank, huge], 64, {}) == (("naconmax", 60), ("njmax", 14))
    assert sweep_capacities([sank, huge], 64, {}) == ()


def test_a_gpu_trial_leaves_room_for_warp_s_pool_scaled_up_with_num_envs_never_down():
    from vramtune.tune.capacity import warp_pool_room

    assert warp_pool_room([], 256) is None
    assert warp_pool_room([warp_trial()], 256) is None  # a CPU trial measures no pool
    mib = 2**20
    small = warp_trial(warp_mempool_high_bytes=100 * mib)  # 64 envs
    large = TrialResult(status=Status.OK, profile="cup", profile_hash="0" * 16, num_envs=512,
                        warp_mempool_high_bytes=400 * mib)
    # 256 envs: scaled from 64's, the nearest size at or below (512's is above: not scaled
    # down); 1024: from 512's, not from 64's x 16, which would multiply its fixed part
    assert warp_pool_room([small, large], 256) == round(400 * mib * CAPACITY_MARGIN)
    assert warp_pool_room([small, large], 1024) == round(800 * mib * CAPACITY_MARGIN)
    assert warp_pool_room([large], 256) == round(400 * mib * CAPACITY_MARGIN)  # none below
    damaged = [warp_trial(warp_mempool_high_bytes=-5), warp_trial(warp_mempool_high_bytes=10**20)]
    assert warp_pool_room(damaged, 256) is None
