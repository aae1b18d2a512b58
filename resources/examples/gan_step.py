"""Custom step code of the ``gan`` example: a small GAN learns points on a ring.

Distloop runs ``train_step`` on every replica under the strategy, exactly as it
runs its built-in step (see ``engine/user_code.py`` for the contract). One step
is one round of the GAN: ONE discriminator update, then TWO generator updates,
each on its own noise. Both losses come back by name, so Distloop plots and
records them as two curves, ``generator`` and ``discriminator`` (the run's
primary loss is their sum).

The discriminator is the project's ``model`` section (2 inputs, 1 logit), so it
can be edited like any project's model; the generator is defined here. The
project's ``loss`` (binary crossentropy from logits, per example) and
``optimizer`` (Adam) serve both networks. All randomness, the ring and the
generator's noise, comes from the dataset: the run repeats exactly, whatever the
number of replicas.
"""

import math

import numpy as np
import tensorflow as tf
from distloop.engine.tf.model import build_model

LATENT = 4
"""Size of the generator's noise vectors."""
NOISE_PER_EXAMPLE = 3
"""One noise vector for the discriminator's update and one for each generator update."""


def build_models(project):
    """Both networks; Distloop calls this inside strategy.scope(), so they are mirrored."""
    seed = project.training.seed
    init = tf.keras.initializers
    generator = tf.keras.Sequential(
        [
            tf.keras.Input((LATENT,)),
            tf.keras.layers.Dense(64, "relu", kernel_initializer=init.HeNormal(seed)),
            tf.keras.layers.Dense(64, "relu", kernel_initializer=init.HeNormal(seed + 1)),
            tf.keras.layers.Dense(2, kernel_initializer=init.GlorotUniform(seed + 2)),
        ]
    )
    discriminator = build_model(project.model, seed + 3)
    return {"generator": generator, "discriminator": discriminator}


def build_dataset(project):
    """Global batches of (a real point on the ring, noise for the round's three updates)."""
    data = project.data
    rng = np.random.default_rng(data.seed)
    angle = rng.uniform(0.0, 2 * math.pi, data.examples)
    radius = 2.0 + 0.05 * rng.standard_normal(data.examples)
    real = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    noise = rng.standard_normal((data.examples, NOISE_PER_EXAMPLE, LATENT))
    dataset = tf.data.Dataset.from_tensor_slices((real.astype("float32"), noise.astype("float32")))
    if data.shuffle_buffer:
        dataset = dataset.shuffle(data.shuffle_buffer, seed=project.training.seed)
    return dataset.batch(data.global_batch_size, drop_remainder=True)


def train_step(step, inputs):
    """One discriminator update, then two generator updates, on this replica's share."""
    real, noise = inputs
    generator, discriminator = step.models["generator"], step.models["discriminator"]
    real_labels = tf.ones([tf.shape(real)[0], 1])
    fake_labels = tf.zeros_like(real_labels)

    fake = generator(noise[:, 0], training=True)
    with tf.GradientTape() as tape:
        per_example = step.loss_object(
            real_labels, discriminator(real, training=True)
        ) + step.loss_object(fake_labels, discriminator(fake, training=True))
        # compute_average_loss over the GLOBAL batch: the cross-replica sum is the mean.
        discriminator_loss = step.average_loss(per_example)
        discriminator_loss += step.regularization_loss(discriminator)
    update(step, "discriminator", tape, discriminator_loss)

    generator_losses = []
    for k in (1, 2):
        with tf.GradientTape() as tape:
            judged = discriminator(generator(noise[:, k], training=True), training=True)
            # The generator wins when its points are judged real.
            generator_loss = step.average_loss(step.loss_object(real_labels, judged))
            generator_loss += step.regularization_loss(generator)
        update(step, "generator", tape, generator_loss)
        generator_losses.append(generator_loss)

    return {
        "generator": (generator_losses[0] + generator_losses[1]) / 2,
        "discriminator": discriminator_loss,
    }


def update(step, name, tape, loss):
    """One optimizer step of the named network (gradients are summed across replicas)."""
    variables = step.models[name].trainable_variables
    gradients = tape.gradient(loss, variables)
    step.optimizers[name].apply_gradients(zip(gradients, variables, strict=True))
