from vramtune.measure.contacts import RAISE, SOLVER_LIMITS, KernelBuilds, overflow_words


def test_contact_overflow_words_name_both_counts_and_the_capacity():
    words = overflow_words(["NARROWPHASE", "NEFC"], naconmax=100, njmax=20, contacts=131,
                           contacts_per_world=40, rows_per_world=25)
    assert words == ("MJX-Warp buffer overflow: contacts (narrowphase): 131 for all worlds "
                     "(40 in one world) asked for, naconmax 100; constraint rows: 25 per world "
                     "asked for, njmax 20; raise naconmax and njmax")


def test_an_overflow_without_a_known_capacity_is_named_without_a_hint():
    assert overflow_words(["HFIELD"], naconmax=None, njmax=None, contacts=None,
                          contacts_per_world=None, rows_per_world=None) == \
        "MJX-Warp buffer overflow: hfield overflow"


def test_solver_limits_are_not_capacities():
    assert not SOLVER_LIMITS & set(RAISE)


def test_kernel_builds_say_cold_warm_or_nothing_measured():
    assert KernelBuilds().fields()["warp_kernel_cache"] is None
    assert KernelBuilds().fields()["warp_kernel_build_s"] is None
    assert KernelBuilds().fields()["warp_kernels_compiled"] is None  # unmeasured, not 0
    assert KernelBuilds(compiled=3, build_s=2.5).fields()["warp_kernel_cache"] == "cold"
    assert KernelBuilds(cached=3, build_s=0.1).fields()["warp_kernel_cache"] == "warm"
    assert KernelBuilds(compiled=1, cached=2).fields()["warp_kernel_cache"] == "partly warm"


def test_both_contact_phases_overflowing_make_one_line():
    words = overflow_words(["NEFC", "BROADPHASE", "NARROWPHASE"], naconmax=24, njmax=7,
                           contacts=28, contacts_per_world=17, rows_per_world=74)
    assert words == ("MJX-Warp buffer overflow: constraint rows: 74 per world asked for, njmax 7; "
                     "contacts (broadphase, narrowphase): 28 for all worlds (17 in one world) "
                     "asked for, naconmax 24; raise naconmax and njmax")
