"""The GPU run's scripts where there is no GPU: they say so and exit 77 (nothing measured); the
timing tool's CPU path writes a timing file the report reads."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

REPO = pathlib.Path(__file__).resolve().parents[2]
VIT = REPO / "bench" / "vit"
sys.path.insert(0, str(VIT))
import vit_timings as vt  # noqa: E402


def gpu_visible():
    smi = shutil.which("nvidia-smi")
    return smi is not None and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=120, **kw)


def test_gpu_vit_says_no_gpu_is_visible_and_exits_77(tmp_path):
    if gpu_visible():
        pytest.skip("a GPU is visible: ./scripts/gpu-vit would measure")
    r = run([str(REPO / "scripts" / "gpu-vit"), str(tmp_path / "out")])
    assert r.returncode == 77, r.stdout + r.stderr
    assert "no GPU visible" in r.stderr and "skipped" in r.stderr
    assert not (tmp_path / "out").exists()  # nothing written, nothing built


def test_the_timing_tool_exits_77_without_cuda(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("torch sees a CUDA GPU")
    r = run([sys.executable, str(VIT / "vit_time.py"), "--out", str(tmp_path / "t.json")])
    assert r.returncode == 77, r.stdout + r.stderr
    assert "no CUDA GPU visible" in r.stderr and not (tmp_path / "t.json").exists()


def test_a_cpu_run_times_real_packs_and_the_report_reads_it(tmp_path):
    packs = tmp_path / "packs.json.gz"
    r = run([sys.executable, str(VIT / "vit_time.py"), "--packs-only", "--calibration", "3",
             "--sources", "captioning/2d-512,vlm-pretrain/2d-1024",
             "--jobs", "tiny:captioning:2", "--encoders", "tiny", "--out", str(packs)])
    assert r.returncode == 0, r.stdout + r.stderr
    made = vt.load(str(packs))
    assert len(made["calibration"]) == 6 and made["timings"] == {}
    timings = tmp_path / "t.json"
    r = run([sys.executable, str(VIT / "vit_time.py"), "--device", "cpu", "--dtype", "float32",
             "--encoders", "tiny", "--jobs", "tiny:captioning:2", "--warmup", "0",
             "--repeats", "2", "--repeat-check", "1", "--packs-from", str(packs),
             "--out", str(timings)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "attention 'per_image': matches per-image attention" in r.stdout
    doc = vt.load(str(timings))
    assert doc["packs"] == made["packs"] and doc["streams"] == made["streams"]
    assert doc["encoders"]["tiny"]["attention"] in ("per_image", "nested")
    table = doc["timings"]["tiny"]
    assert set(table) == {str(i) for i in made["calibration"] + made["streams"]["captioning"]
                          ["packs"][:2] if made["packs"][i]["images"]}
    for i in made["calibration"]:
        assert len(table[str(i)]["ms"]) == 2 and all(t > 0 for t in table[str(i)]["ms"])
        assert all(0 < f < t for f, t in zip(table[str(i)]["fwd_ms"], table[str(i)]["ms"]))
    assert len(doc["repeat"]["tiny"]) == 1
    assert doc["machine"]["device"] == "cpu" and doc["machine"]["torch"] == torch.__version__
    # the report reads it: a fit, and the one batch of dp 1 x ga 2
    r = run([sys.executable, str(VIT / "vit_report.py"), str(timings), "--dp", "1", "--ga", "2"],
            env=dict(os.environ))
    assert r.returncode in (0, 3), r.stdout + r.stderr
    assert "## Calibration: tiny" in r.stdout and "tiny, captioning, dp 1 x ga 2" in r.stdout


def test_a_budget_too_small_for_a_job_skips_it_and_says_why(tmp_path):
    def time_with(budget, out):
        r = run([sys.executable, str(VIT / "vit_time.py"), "--device", "cpu", "--dtype",
                 "float32", "--encoders", "tiny", "--calibration", "2", "--sources",
                 "captioning/2d-512", "--jobs", "tiny:vlm-pretrain:4096", "--warmup", "0",
                 "--repeats", "1", "--budget-s", str(budget), "--out", str(out)])
        assert r.returncode == 0, r.stdout + r.stderr
        return vt.load(str(out))

    # 4,095 full packs with images take minutes on the CPU; two small calibration packs, a second
    doc = time_with(10, tmp_path / "a.json")
    assert len(doc["timings"]["tiny"]) == 2  # the calibration packs only
    assert any(n.startswith("skipped tiny:vlm-pretrain:4096: 4095 packs need about") for n in
               doc["notes"]), doc["notes"]
    doc = time_with(0, tmp_path / "b.json")
    assert doc["timings"]["tiny"] == {}
    assert "tiny: out of budget after 0 of 2 calibration packs" in doc["notes"]
