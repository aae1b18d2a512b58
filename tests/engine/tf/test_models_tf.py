"""The model builder against real Keras, and a real engine run of a saved .keras model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.project_file import load_project_data
from support.distloop_testing import REPO, run_engine


@pytest.mark.slow
def test_models_match_keras_and_a_keras_file_trains_in_bfloat16_on_two_replicas(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "tests" / "support" / "model_checks.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])

    for name, model in report["shapes"].items():
        assert model["predicted"] == model["keras"], name
        assert model["trainable"] == model["keras_trainable"], name
    # Momentum 0: the moving variance is the batch's. Synchronized, the global batch's
    # (0, 2, 10, 12: 26); per replica, each half's (1).
    assert report["synchronized_variance"] == pytest.approx(26.0)
    assert report["replica_variance"] == pytest.approx(1.0)
    float16 = report["float16"]
    assert float16["compute_dtype"] == "float16" and float16["kernel_dtype"] == "float32"
    assert float16["output_dtype"] == "float32" and float16["loss_dtype"] == "float32"
    assert np.isfinite(float16["loss"]) and float16["moved"]
    assert len(float16["fused_losses"]) == 3 and np.isfinite(float16["fused_losses"]).all()
    assert float16["scale"] == 2.0**15  # Keras's initial scale, kept: the gradients were finite
    broken, wrong_shape, bad_weights, float32_layers = report["load_failures"]
    assert broken.startswith("model.path: ") and "is not a .keras model file" in broken
    assert wrong_shape.startswith("model.input_shape: [8, 8, 3] does not match the input")
    assert bad_weights.startswith("model.weights: cannot load ")
    assert float32_layers.startswith("training.mixed_precision: the layers of ")
    assert "compute in float32, not mixed_bfloat16" in float32_layers
    assert all("\n" not in message for message in report["load_failures"])

    project = load_project_data(
        {
            "schema_version": 1,
            "name": "saved conv model",
            "strategy": {"kind": "mirrored", "cpu_replicas": 2},
            "model": {
                "kind": "keras_file",
                "path": str(tmp_path / "conv.keras"),
                "input_shape": [8, 8, 1],
            },
            "optimizer": {"kind": "adam", "learning_rate": 0.01},
            "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
            "data": {
                "source": "synthetic_classification",
                "examples": 256,
                "num_classes": 3,
                "global_batch_size": 32,
            },
            "training": {"steps": 40, "mixed_precision": "mixed_bfloat16"},
        }
    )
    engine = run_engine(project, None)
    assert engine["started"].num_replicas == 2
    losses = np.asarray(engine["losses"])
    assert len(losses) == 40 and np.isfinite(losses).all()
    assert losses[-8:].mean() < 0.8 * losses[:8].mean()
