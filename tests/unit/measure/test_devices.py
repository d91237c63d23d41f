import pytest

from vramtune.measure.devices import (
    DeviceResolutionError,
    GpuDevice,
    MigDevice,
    parse_visible_devices,
    resolve,
    runtime_uuid_to_nvml,
)

U0 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"
U1 = "GPU-18ef14e9-dec6-1d7e-1284-3010c6ce98b1"
U2 = "GPU-849d5a8d-610e-eeea-1fd4-81ff44a23794"
U3 = "GPU-849d0000-610e-eeea-1fd4-81ff44a23795"  # shares "GPU-849d" with U2

G0 = GpuDevice(0, U0, "00000000:18:00.0", "NVIDIA A100-SXM4-80GB", 85_899_345_920)
G1 = GpuDevice(1, U1, "00000000:3B:00.0", "NVIDIA A100-SXM4-80GB", 85_899_345_920)
G2 = GpuDevice(2, U2, "00000000:86:00.0", "NVIDIA A100-SXM4-80GB", 85_899_345_920)
SAME = [G0, G1, G2]

MIXED = [GpuDevice(0, U0, "00000000:01:00.0", "NVIDIA GeForce GTX 1050 Ti"),
         GpuDevice(1, U1, "00000000:02:00.0", "NVIDIA GeForce RTX 4090")]

MIG_A = MigDevice("MIG-d184f67c-c95f-5ef2-a935-195bd0094fbd", 13, 0, 0, 10_200_547_328)
MIG_B = MigDevice("MIG-37b51284-1df4-5451-979d-3231ccb0822e", 11, 0, 1, 10_200_547_328)
GMIG = GpuDevice(0, "GPU-3eb79704-1571-707c-aee8-f43ce747313d", "00000000:07:00.0",
                 "NVIDIA A100-SXM4-80GB", 85_899_345_920, mig_enabled=True, migs=(MIG_A, MIG_B))


def pci(order=None, value=None, gpus=SAME):
    return parse_visible_devices(value, gpus, order)


def test_unset_all_gpus_in_pci_order_certain_under_pci_bus_id():
    r = pci("PCI_BUS_ID")
    assert r.uuids == (U0, U1, U2) and r.certain and r.source == "parsed"


def test_unset_fastest_first_is_a_prediction():
    r = pci(None)
    assert r.uuids == (U0, U1, U2) and not r.certain
    assert any("FASTEST_FIRST" in n for n in r.notes)


def test_empty_string_means_no_device():
    r = pci("PCI_BUS_ID", "")
    assert r.uuids == () and r.certain


def test_integers_follow_the_sequence_order():
    assert pci("PCI_BUS_ID", "2,0").uuids == (U2, U0)


def test_cuda_guide_example_stops_at_first_invalid():
    # CUDA guide: 0,2,-1,1 -> devices 0 and 2 visible, 1 not
    r = pci("PCI_BUS_ID", "0,2,-1,1")
    assert r.uuids == (U0, U2)
    assert any("'-1' is invalid" in n and "-1,1" in n for n in r.notes)


def test_out_of_range_stops():
    assert pci("PCI_BUS_ID", "1,7,0").uuids == (U1,)


def test_garbage_entry_stops():
    assert pci("PCI_BUS_ID", "0,abc,1").uuids == (U0,)


def test_leading_digits_are_read():
    r = pci("PCI_BUS_ID", "1abc")
    assert r.uuids == (U1,) and any("read as '1'" in n for n in r.notes)


def test_whitespace_is_ignored():
    assert pci("PCI_BUS_ID", " 1 , 2 ").uuids == (U1, U2)


def test_duplicates_make_the_list_empty():
    assert pci("PCI_BUS_ID", "0,0").uuids == ()


def test_duplicate_by_uuid_prefix_and_full():
    assert pci("PCI_BUS_ID", f"GPU-8932,{U0}").uuids == ()


def test_integer_under_fastest_first_mixed_models_uncertain():
    r = parse_visible_devices("0", MIXED, None)
    assert not r.certain and any("mixed GPU models" in n for n in r.notes)


def test_integer_under_fastest_first_same_model_still_uncertain():
    r = parse_visible_devices("1", SAME, "FASTEST_FIRST")
    assert r.uuids == (U1,) and not r.certain


def test_single_gpu_is_certain_whatever_the_order():
    assert parse_visible_devices("0", [G0], None).certain


def test_full_and_abbreviated_uuids():
    assert pci(None, f"{U1},GPU-849d5a8d").uuids == (U1, U2)
    assert pci(None, f"{U1},GPU-849d5a8d").certain  # UUIDs do not depend on the order


def test_uuid_prefix_is_case_insensitive():
    assert pci(None, "GPU-18EF14E9").uuids == (U1,)


def test_ambiguous_prefix_is_invalid():
    r = parse_visible_devices("GPU-849d", [G0, G2, GpuDevice(3, U3)], None)
    assert r.uuids == () and any("ambiguous" in n for n in r.notes)


def test_unknown_uuid_stops():
    assert pci(None, f"{U0},GPU-ffffffff").uuids == (U0,)


def test_mixing_integers_and_uuids_stops_at_the_switch():
    r = pci("PCI_BUS_ID", f"0,{U1}")
    assert r.uuids == (U0,) and any("mixed" in n for n in r.notes)


def test_mig_uuid():
    r = parse_visible_devices(MIG_B.uuid, [GMIG, G1], None)
    assert r.uuids == (MIG_B.uuid,)
    assert r.devices[0].gpu is GMIG and r.devices[0].memory_total == 10_200_547_328


def test_legacy_mig_form_with_full_and_abbreviated_gpu_uuid():
    full = f"MIG-{GMIG.uuid}/13/0"
    short = "MIG-GPU-3eb79704/11/0"
    assert parse_visible_devices(full, [GMIG], None).uuids == (MIG_A.uuid,)
    assert parse_visible_devices(short, [GMIG], None).uuids == (MIG_B.uuid,)


def test_legacy_mig_form_unknown_instance_is_invalid():
    assert parse_visible_devices("MIG-GPU-3eb79704/5/0", [GMIG], None).uuids == ()


def test_only_one_mig_device_is_visible():
    r = parse_visible_devices(f"{MIG_A.uuid},{MIG_B.uuid}", [GMIG], None)
    assert r.uuids == (MIG_A.uuid,) and any("at most one MIG" in n for n in r.notes)
    r = parse_visible_devices(f"{MIG_A.uuid},{MIG_B.uuid}", [GMIG], None, single_mig=False)
    assert r.uuids == (MIG_A.uuid, MIG_B.uuid)


def test_unset_with_mig_enabled_gives_the_first_slice_not_the_card():
    # the bug issue 12 item 3 names: NVML index 0 is the whole card, XLA sees a slice
    r = parse_visible_devices(None, [GMIG, G1], "PCI_BUS_ID")
    assert r.uuids == (MIG_A.uuid,)
    assert r.devices[0].memory_total == 10_200_547_328 != GMIG.memory_total


def test_mig_enabled_gpu_without_instances_is_skipped():
    empty = GpuDevice(0, GMIG.uuid, GMIG.pci_bus_id, mig_enabled=True)
    r = parse_visible_devices(None, [empty, G1], "PCI_BUS_ID")
    assert r.uuids == (U1,) and any("no MIG device" in n for n in r.notes)


def test_runtime_uuids_win_and_differences_are_noted():
    # integer 0 under FASTEST_FIRST: the runtime says it is the 4090, not NVML index 0
    r = resolve("0", MIXED, None, runtime_uuids=[U1[4:]])
    assert r.uuids == (U1,) and r.source == "runtime" and r.certain
    assert any("the CUDA runtime reported" in n for n in r.notes)


def test_runtime_uuid_forms():
    raw = U2[4:]
    assert runtime_uuid_to_nvml(raw, SAME).uuid == U2
    assert runtime_uuid_to_nvml(U2.upper(), SAME).uuid == U2
    assert runtime_uuid_to_nvml(raw.replace("-", ""), SAME).uuid == U2
    assert runtime_uuid_to_nvml(MIG_A.uuid[4:], [GMIG]).uuid == MIG_A.uuid  # cuDeviceGetUuid_v2


def test_runtime_uuid_unknown_to_nvml_raises():
    with pytest.raises(DeviceResolutionError, match="does not list"):
        runtime_uuid_to_nvml("ffffffff-ffff-ffff-ffff-ffffffffffff", SAME)
    with pytest.raises(DeviceResolutionError, match="not a UUID"):
        runtime_uuid_to_nvml("GPU-12", SAME)


def test_runtime_empty_list_means_no_device():
    r = resolve("", SAME, None, runtime_uuids=[])
    assert r.uuids == () and r.source == "runtime"
