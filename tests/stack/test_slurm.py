"""[slurm]: the batch job from environment variables (Slurm, PBS, LSF)."""

from __future__ import annotations

import pytest

from envlock.probes.slurm import _int, _mem_bytes, probe_slurm
from envlock.probes.world import World

SLURM_GPU_JOB = {
    "SLURM_JOB_ID": "4242421",
    "SLURM_JOB_NAME": "train-resnet",
    "SLURM_JOB_PARTITION": "gpu",
    "SLURM_CLUSTER_NAME": "hpc1",
    "SLURM_JOB_NODELIST": "gpu[01-04]",
    "SLURMD_NODENAME": "gpu02",
    "SLURM_JOB_NUM_NODES": "4",
    "SLURM_NTASKS": "16",
    "SLURM_CPUS_ON_NODE": "32",
    "SLURM_CPUS_PER_TASK": "8",
    "SLURM_MEM_PER_NODE": "257000",
    "SLURM_JOB_GPUS": "0,1,2,3",
    "SLURM_STEP_GPUS": "0,1,2,3",
    "SLURM_GPUS_ON_NODE": "4",
    "SLURM_SUBMIT_DIR": "/home/alice/proj",
    "SLURM_JOB_ACCOUNT": "ml-lab",
    "AWS_SECRET_ACCESS_KEY": "must-not-be-recorded",
    "HOME": "/home/alice",
}


def test_slurm_gpu_job() -> None:
    info = probe_slurm(World(environ=SLURM_GPU_JOB))
    assert info.status == "ok"
    assert info.scheduler == "slurm"
    assert (info.job_id, info.job_name, info.partition, info.cluster) == (
        "4242421",
        "train-resnet",
        "gpu",
        "hpc1",
    )
    assert (info.nodelist, info.node, info.num_nodes, info.ntasks) == ("gpu[01-04]", "gpu02", 4, 16)
    assert (info.cpus_on_node, info.cpus_per_task) == (32, 8)
    assert info.mem_per_node == 257000 * 1024 * 1024
    assert (info.gpus, info.step_gpus, info.gpus_on_node) == ("0,1,2,3", "0,1,2,3", 4)
    assert info.submit_dir == "/home/alice/proj"
    assert "AWS_SECRET_ACCESS_KEY" not in info.vars and "HOME" not in info.vars
    assert info.vars["SLURM_JOB_ACCOUNT"] == "ml-lab"


def test_slurm_array_task() -> None:
    info = probe_slurm(
        World(environ={
            "SLURM_JOB_ID": "1001",
            "SLURM_ARRAY_JOB_ID": "1000",
            "SLURM_ARRAY_TASK_ID": "7",
            "SLURM_MEM_PER_CPU": "4096",
            "SLURM_CPUS_ON_NODE": "2(x3)",
        })
    )
    assert info.job_id == "1000_7"
    assert info.mem_per_cpu == 4 * 1024**3
    assert info.cpus_on_node == 2


def test_pbs_job() -> None:
    info = probe_slurm(
        World(environ={
            "PBS_JOBID": "12345.pbs01",
            "PBS_JOBNAME": "run",
            "PBS_QUEUE": "workq",
            "PBS_O_WORKDIR": "/scratch/bob",
            "NCPUS": "24",
        })
    )
    assert (info.scheduler, info.job_id, info.partition, info.submit_dir, info.cpus_on_node) == (
        "pbs",
        "12345.pbs01",
        "workq",
        "/scratch/bob",
        24,
    )


def test_lsf_job() -> None:
    info = probe_slurm(
        World(environ={
            "LSB_JOBID": "777",
            "LSB_QUEUE": "normal",
            "LSB_HOSTS": "n1 n1 n2",
            "LSB_DJOB_NUMPROC": "3",
        })
    )
    assert (info.scheduler, info.job_id, info.partition, info.nodelist, info.ntasks) == (
        "lsf",
        "777",
        "normal",
        "n1 n2",
        3,
    )


def test_not_in_a_job() -> None:
    info = probe_slurm(World(environ={"HOME": "/root", "PATH": "/usr/bin"}))
    assert info.status == "absent"
    assert info.scheduler is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("4096", 4096 * 1024**2),
        ("16G", 16 * 1024**3),
        ("512M", 512 * 1024**2),
        ("1T", 1024**4),
        ("", None),
        ("lots", None),
        (None, None),
    ],
)
def test_mem_bytes(value, expected) -> None:
    assert _mem_bytes(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [("8", 8), ("2(x3)", 2), ("", None), ("x", None), (None, None)]
)
def test_int(value, expected) -> None:
    assert _int(value) == expected
