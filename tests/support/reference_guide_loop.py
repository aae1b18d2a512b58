"""The reference guide's program, written out by hand with no Distloop code at all.

The engine must reproduce its loss trace exactly; the only additions to the
guide's code are the Keras 3 requirements it states (reduction=None, the model
built with an Input and the optimizer built inside the scope) and fixed seeds so
two programs can be compared. Prints one loss per line.
"""

import tensorflow as tf

tf.keras.utils.set_random_seed(0)
tf.config.experimental.enable_op_determinism()
strategy = tf.distribute.MirroredStrategy()
global_batch_size = 10

with strategy.scope():
    model = tf.keras.Sequential(
        [
            tf.keras.Input((1,)),
            tf.keras.layers.Dense(
                1,
                kernel_regularizer=tf.keras.regularizers.L2(1e-4),
                kernel_initializer=tf.keras.initializers.GlorotUniform(seed=0),
            ),
        ]
    )
    optimizer = tf.keras.optimizers.SGD()
    optimizer.build(model.trainable_variables)

dataset = tf.data.Dataset.from_tensors(([1.0], [1.0])).repeat(1000).batch(global_batch_size)
dist_dataset = strategy.experimental_distribute_dataset(dataset)
loss_object = tf.keras.losses.BinaryCrossentropy(from_logits=True, reduction=None)


def train_step(inputs):
    features, labels = inputs
    with tf.GradientTape() as tape:
        predictions = model(features, training=True)
        per_example_loss = loss_object(labels, predictions)
        loss = tf.nn.compute_average_loss(per_example_loss)
        if model.losses:
            loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=False))
    return loss


@tf.function
def distributed_train_step(dist_inputs):
    per_replica_losses = strategy.run(train_step, args=(dist_inputs,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)


for dist_inputs in dist_dataset:
    print(repr(float(distributed_train_step(dist_inputs))))
