# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10 — The Vision Transformer: images as sequences of patches
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-course/transformer-course/blob/v0.1.0/release/10_vision_transformer.ipynb)
#
# **Run time:** full profile about 14 min on a 2-core CPU, smoke profile about 30 s (recorded runs). The profile comes from the environment variable `COURSE_PROFILE` (`full` or `smoke`): set it before starting Jupyter, or in Colab run `%env COURSE_PROFILE=smoke` before the first code cell. On Colab, a GPU runtime (Runtime, Change runtime type) trains on the GPU; the recorded times are CPU times. The outputs shown come from the recorded full-profile run; running a cell replaces its output with yours. In the smoke profile, run the exercises and their checks, and the cells whose output does not depend on the profile (shapes, worked examples, equalities with Keras): the accuracies, losses, curves, timings and samples it prints come from tiny data and a few steps and mean nothing; read the recorded ones.
#
# **What you will learn**
# - why a Transformer cannot simply read an image pixel by pixel: the cost of self-attention
#   grows with the **square** of the number of tokens — worked out, then measured;
# - how an image becomes a sequence: **patches**, cut with one reshape and one transpose, and a
#   **linear patch embedding** that is the same thing as a convolution;
# - the **Vision Transformer** (ViT): a `[CLS]` token, learned position embeddings, pre-norm
#   encoder blocks and a classifier on `[CLS]`;
# - what the patch size trades, and how a ViT fares against a logistic regression, an SVM and a
#   small CNN on a small data set — and why;
# - what the model looks at (**attention rollout**) and what its position embeddings learned.
#
# **Prerequisites:** notebook 04 (multi-head attention), notebook 05 (the encoder block),
# notebook 06 (a `[CLS]` token for classification).
#
# Data: the handwritten digits bundled with scikit-learn (`load_digits`): a copy of the test set
# of the UCI "Optical Recognition of Handwritten Digits" data set — E. Alpaydin and C. Kaynak,
# 1998, UCI Machine Learning Repository, https://archive.ics.uci.edu/dataset/80 (CC BY 4.0).
# 1,797 images of 8×8 pixels, 10 classes; no download is needed.

# %%
import subprocess
import sys

if "google.colab" in sys.modules:  # Colab only: install the course package, keep Colab's TensorFlow/Keras
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "transformer-course @ git+https://github.com/transformer-course/transformer-course@v0.1.0"],
                   check=True)

import transformer_course as tc

settings = tc.start_notebook("10", seed=42)

# %%
import time

import keras
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from transformer_course import checkpoint_path, epoch_progress, report_metric
from transformer_course.attention import MultiHeadAttention
from transformer_course.plots import plot_training_curves
from transformer_course.training import WarmupCosineDecay, fit_best
from transformer_course.vision import (
    ImageBatches,
    PatchEmbedding,
    VisionTransformer,
    attention_maps,
    attention_rollout,
    extract_patches,
)

# %% [markdown]
# ## 1. The data: 1,797 small digits
#
# Each image is 8×8 pixels. A pixel is not a grey level scanned at that size: the original
# 32×32 black-and-white bitmaps were cut into 4×4 blocks and each block's count of black pixels
# (0 to 16) became one pixel. We scale the counts to [0, 1] and add a channel axis, as Keras'
# image layers expect `(batch, height, width, channels)`.
#
# One split, fixed by a seed and **stratified** (every class in the same proportion in each
# part): 70% to train, 10% to choose the best epoch and the baselines' settings, 20% to test,
# once, at the end.

# %%
digits = load_digits()
images = (digits.images / 16.0).astype("float32")[..., None]  # (1797, 8, 8, 1), in [0, 1]
labels = digits.target.astype("int64")  # (1797,), 0..9
rest_images, test_images, rest_labels, test_labels = train_test_split(
    images, labels, test_size=settings.test_fraction, stratify=labels, random_state=settings.split_seed)
train_images, validation_images, train_labels, validation_labels = train_test_split(
    rest_images, rest_labels, test_size=settings.validation_fraction / (1 - settings.test_fraction),
    stratify=rest_labels, random_state=settings.split_seed)
for name, part in (("train", train_labels), ("validation", validation_labels), ("test", test_labels)):
    print(f"{name:<10} {len(part):>5} images; per class {np.bincount(part, minlength=10).min()}–"
          f"{np.bincount(part, minlength=10).max()}")

# %%
figure, axes = plt.subplots(2, 10, figsize=(10, 2.4))
shown = [np.flatnonzero(train_labels == digit)[row] for row in range(2) for digit in range(10)]
for axis, index in zip(axes.ravel(), shown):
    axis.imshow(train_images[index, :, :, 0], cmap="gray_r", vmin=0, vmax=1)
    axis.set_title(str(train_labels[index]), fontsize=9)
    axis.axis("off")
figure.suptitle("Training images (8×8 pixels)")
plt.show()

# %% [markdown]
# ## 2. Why not one token per pixel?
#
# Self-attention scores every query against every key: with $T$ tokens, $T^2$ scores per head
# and per layer, each a dot product of width $H$ (the head width). Text has hundreds of tokens.
# A 256×256 photograph has $256^2 = 65{,}536$ pixels; as tokens, that is more than four billion scores per
# head per layer, and storing one head's weights in float32 takes 17 GB.

# %%
pixels = 256 * 256
scores = pixels ** 2
print(f"256 × 256 = {pixels:,} pixels -> {scores:,} scores per head and layer "
      f"({scores * 4 / 1e9:.1f} GB of float32 weights)")

# %% [markdown]
# > **The notes say** a 256×256 image has 62,500 pixels and so needs 3,906,250,000 calculations.
# > 62,500 is 250²; 256² is 65,536, and 65,536² = 4,294,967,296 scores. The conclusion stands:
# > attention over raw pixels is far too expensive.
#
# Now measure it. One multi-head attention layer (the course's, 4 heads, width
# `attention_width`), batch 1, at growing sequence lengths: the median time of a few calls, and
# the size of the attention-weight tensor it returns. On a log-log plot a cost proportional to
# $T^p$ is a straight line of slope $p$; the fitted slope over the longest lengths is printed.
# (Times come from whatever machine runs this cell and include some fixed overhead per call,
# which flattens the curve at short lengths.)

# %%
layer = MultiHeadAttention(num_heads=4, key_dim=settings.attention_width // 4)
lengths, seconds, megabytes = settings.attention_lengths, [], []
for length in lengths:
    x = keras.random.normal((1, length, settings.attention_width), seed=0)
    layer(x, x)  # the first call builds the layer: not timed
    times = []
    for _ in range(settings.attention_repeats):
        start = time.perf_counter()
        _, weights = layer(x, x, return_attention_scores=True)
        weights = keras.ops.convert_to_numpy(weights)  # waits for the result
        times.append(time.perf_counter() - start)
    seconds.append(float(np.median(times)))
    megabytes.append(weights.nbytes / 1e6)  # (1, 4, T, T) float32
    print(f"T = {length:>5}: {seconds[-1] * 1e3:9.2f} ms, attention weights {megabytes[-1]:9.2f} MB")

# %%
fitted = slice(-3, None)  # the three longest lengths, where the T² terms dominate
slope = np.polyfit(np.log(lengths[fitted]), np.log(seconds[fitted]), 1)[0]
figure, axes = plt.subplots(1, 2, figsize=(10, 3.5))
for axis, values, unit in ((axes[0], seconds, "seconds"), (axes[1], megabytes, "MB of attention weights")):
    axis.loglog(lengths, values, "o-")
    axis.set_xlabel("tokens T")
    axis.set_ylabel(unit)
axes[0].set_title(f"time: fitted slope {slope:.2f} over T ≥ {lengths[fitted][0]}")
axes[1].set_title("memory: exactly 4·4·T² bytes (slope 2)")
plt.show()
report_metric("attention_time_slope", slope, "log-log slope of one attention layer's time over the longest lengths")

# %% [markdown]
# The memory of the weights grows exactly as $T^2$ (16 bytes per query–key pair for 4 heads of
# float32). The fitted slope of the time is an average over the three longest lengths. In the
# stored run the last two doublings multiplied the time by 2.72 and 3.64 (31.14 → 84.84 → 309.10
# ms): a slope of 1.66, not 2. Count the work: a layer does the four projections, $4TE^2$
# multiply-adds, plus the scores and the weighted sum, $2T^2E$. With $E = 64$ that is 0.57, 2.21
# and 8.72 billion multiply-adds at 2,048, 4,096 and 8,192 tokens, 94–99% of it in the $T^2$
# term: the work does grow ×3.9 per doubling. The time grew less because the machine did the
# work faster at larger sizes: by this count 18.3, 26.1 and 28.2 billion multiply-adds a second
# (and 0.1 billion at 16 tokens, where the fixed cost of about 3 ms per call dominates). So the
# slope of the time measures the work *and* how efficiently this CPU runs it; the work's slope
# is 2. Why bigger products run faster (longer loops that keep the vector units and caches busy)
# is a hypothesis this cell does not test.
# For an 8×8 digit, 64 pixel tokens would still be cheap — but the same rule sends a 224×224
# photograph to 50,176 tokens. The ViT's answer: fewer, bigger tokens.
#
# ## 3. Patches
#
# Cut the image into non-overlapping $P \times P$ patches and flatten each one: an image of
# height × width pixels with $C$ channels becomes a sequence of
# $M = \text{height} \cdot \text{width} / P^2$ vectors of $P^2 C$ numbers (notebook 04's notation:
# $M$ patches, since $N$ counts heads and $H$ is a head's width). With one reshape and one
# transpose: reshape `(B, height, width, C)` to `(B, height/P, P, width/P, P, C)` — rows of
# patches, pixel row inside a patch, columns of patches, pixel column inside a patch — then move
# the two patch-grid axes to the front, `(B, height/P, width/P, P, P, C)`, and flatten. Without the
# transpose, a "patch" would be a strip of pixels from different patches (exercise 10.1 asks you
# to write it).
#
# `transformer_course.vision.extract_patches` does exactly this. Keras has the same operation;
# the two agree to the last value:

# %%
for patch_size in (1, 2, 4, 8):
    ours = extract_patches(train_images[:16], patch_size)  # (16, M, P·P·1)
    theirs = keras.ops.convert_to_numpy(keras.ops.image.extract_patches(train_images[:16], patch_size))
    print(f"P = {patch_size}: {ours.shape[1]:>2} patches of {ours.shape[2]:>2} numbers; equal to Keras': "
          f"{np.array_equal(ours, theirs.reshape(ours.shape))}")

# %%
patches = extract_patches(train_images[:1], settings.patch_size)[0]  # (M, P·P)
grid = 8 // settings.patch_size
figure, axes = plt.subplots(grid, grid, figsize=(3.2, 3.2))
for index, axis in enumerate(axes.ravel()):
    axis.imshow(patches[index].reshape(settings.patch_size, settings.patch_size), cmap="gray_r", vmin=0, vmax=1)
    axis.set_xticks([])
    axis.set_yticks([])
    axis.set_title(str(index), fontsize=7)
figure.suptitle(f"a '{train_labels[0]}' as {grid * grid} patches, in reading order", fontsize=9)
plt.show()

# %% [markdown]
# Each flattened patch is multiplied by one shared matrix $\mathbf{E}$ of shape $(P^2C, E)$,
# plus a bias: the **linear patch embedding** (Dosovitskiy et al., 2021, Eq. 1). Sliding one
# $P \times P$ filter per output feature over the image with stride $P$ does the same
# arithmetic, so the embedding *is* a `Conv2D` with kernel size and stride $P$ — and that is how
# ViT code usually writes it. Copy the weights of the course's `PatchEmbedding` into a `Conv2D`
# and compare:

# %%
embedding = PatchEmbedding(patch_size=settings.patch_size, embed_dim=settings.model.embed_dim)
embedded = keras.ops.convert_to_numpy(embedding(train_images[:16]))  # (16, N, E)
kernel, bias = embedding.projection.get_weights()  # (P·P·C, E), (E,)
convolution = keras.layers.Conv2D(settings.model.embed_dim, kernel_size=settings.patch_size,
                                  strides=settings.patch_size)
convolution.build(train_images[:16].shape)
convolution.set_weights([kernel.reshape(settings.patch_size, settings.patch_size, 1, settings.model.embed_dim), bias])
convolved = keras.ops.convert_to_numpy(convolution(train_images[:16]))  # (16, H/P, W/P, E)
print("patch embedding", embedded.shape, "| Conv2D", convolved.shape)
print("equal:", np.allclose(embedded, convolved.reshape(embedded.shape), atol=1e-5))

# %% [markdown]
# ## 4. The Vision Transformer
#
# From here on a digit is a sentence of $M$ patch vectors, and the rest is notebook 05's
# encoder (Dosovitskiy et al., 2021, §3.1):
#
# 1. embed the patches linearly (above);
# 2. put a learned `[CLS]` vector in front — as in BERT and in notebook 06, its output will
#    summarise the image;
# 3. add a **learned position embedding**: one vector per position, $M + 1$ of them. Nothing
#    tells the model that patch 5 sits below patch 1; whatever it knows about the 2-D layout it
#    must learn (section 7 looks at what it learned);
# 4. a stack of **pre-norm** encoder blocks (LayerNorm before each sub-layer, GELU in the
#    feed-forward network), as ViT uses;
# 5. a final LayerNorm, the `[CLS]` output, and one softmax layer over the 10 classes.
#
# There is no padding: every patch is a real token, so no mask is needed.

# %%
def build_vit(patch_size=settings.patch_size):
    """The notebook's ViT for 8×8 grey images and 10 classes, at `patch_size`."""
    return VisionTransformer(image_size=8, channels=1, patch_size=patch_size, num_classes=10,
                             **settings.model)


vit = build_vit()
print(f"tokens: {(8 // settings.patch_size) ** 2} patches + [CLS]; parameters: {vit.count_params():,}")
vit.summary(line_length=90)

# %% [markdown]
# The model is a registered Keras model: saved to one `.keras` file, it loads back with no
# `custom_objects` and predicts the same numbers.

# %%
path = checkpoint_path("vit_untrained")
vit.save(path)
reloaded = keras.models.load_model(path)
print(type(reloaded).__name__, "| same predictions:",
      np.allclose(vit.predict(test_images[:64], verbose=0), reloaded.predict(test_images[:64], verbose=0), atol=1e-6))

# %% [markdown]
# ## 5. Training, three times
#
# A small data set makes single numbers noisy: on 360 test images one mistake is 0.28 points.
# So the ViT is trained from three seeds (different initial weights, batch orders and shifts)
# and we report the mean and the spread.
#
# The recipe: AdamW (Adam with decoupled weight decay), a learning rate that warms up for
# `warmup_epochs` and then follows a half cosine to the end of training, and the weights of the
# epoch with the lowest validation loss (`fit_best`, notebook 01's helper). Keras compiles the
# training step with XLA when `jit_compile` is on; on a CPU it is off unless asked for, and this
# small model trains much faster with it. **Augmentation:**
# every epoch, each training image is moved by up to `max_shift` pixel in each direction
# (`ImageBatches`), so the model never sees exactly the same pixels twice. Section 6 shows what
# that is worth. Every batch holds exactly `batch_size` images; the few left over sit out that
# epoch, a different few each time. The validation and the test images each go in as one batch.
# (With XLA, every new batch shape costs one more compilation.) The settings (batch size, learning rate, epochs, dropout)
# were chosen by validation accuracy and loss only; the test images played no part.

# %%
def compile_with_recipe(model, steps, epochs):
    """Compile `model` for `epochs` epochs of `steps` batches: AdamW, warm-up + cosine, accuracy."""
    schedule = WarmupCosineDecay(settings.learning_rate, settings.warmup_epochs * steps, epochs * steps)
    model.compile(optimizer=keras.optimizers.AdamW(schedule, weight_decay=settings.weight_decay),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"], jit_compile=settings.jit_compile)
    return model


# %%
def train_and_test(build, name, seed, max_shift=settings.max_shift, epochs=settings.epochs):
    """Build a model with `seed`, train it with fit_best, and return (model, history, facts with test accuracy)."""
    keras.utils.set_random_seed(seed)
    batches = ImageBatches(train_images, train_labels, settings.batch_size, seed, max_shift, drop_remainder=True)
    model = compile_with_recipe(build(), len(batches), epochs)
    model, history, facts = fit_best(model, batches, (validation_images, validation_labels), epochs=epochs,
                                     patience=settings.patience, callbacks=[epoch_progress()],
                                     validation_batch_size=len(validation_images))
    predictions = model.predict(test_images, batch_size=len(test_images), verbose=0)
    facts["test_accuracy"] = float(np.mean(predictions.argmax(-1) == test_labels))
    facts["seconds_per_epoch"] = float(np.median(facts["epoch_seconds"][1:] or facts["epoch_seconds"]))  # no compiling
    print(f"{name}, seed {seed}: test accuracy {facts['test_accuracy']:.2%}, best epoch {facts['best_epoch']}"
          f"/{facts['epochs']}, {facts['seconds']:.0f} s ({facts['seconds_per_epoch']:.2f} s/epoch)")
    return model, history, facts

# %%
vit_runs = [train_and_test(build_vit, "ViT 2×2" if settings.patch_size == 2 else "ViT", seed)
            for seed in settings.seeds]
vit_accuracies = np.array([facts["test_accuracy"] for _, _, facts in vit_runs])
report_metric("vit_test_accuracy_mean", vit_accuracies.mean(),
              f"ViT: mean test accuracy over {len(vit_accuracies)} seeds (360 test images)", headline=True)
report_metric("vit_test_accuracy_spread", vit_accuracies.max() - vit_accuracies.min(),
              "ViT: highest minus lowest test accuracy over the seeds")
vit, vit_history, vit_facts = vit_runs[0]

# %%
plot_training_curves({f"seed {seed}": history for seed, (_, history, _) in zip(settings.seeds, vit_runs)},
                     log_scale=("loss",))
plt.show()

# %% [markdown]
# ## 6. What the choices are worth
#
# ### Patch size
#
# Smaller patches mean more tokens: 1×1 patches make each pixel a token (64 + `[CLS]`), 4×4
# patches leave 4 tokens. The parameter count barely changes (only the patch embedding's input
# width and the number of position vectors do); the attention work grows with the square of the
# tokens.
#
# The patch-size comparisons are shorter runs: one seed, `comparison_epochs` epochs each
# instead of section 5's `epochs` (a 1×1 ViT costs about four times as much per epoch as a
# 2×2 one). The same recipe otherwise, with the schedule fitted to the shorter run. Their
# accuracies are therefore lower than section 5's; compare them with each other.

# %%
def compare(build, name, **options):
    """Train a comparison run: seed `seeds[0]`, `comparison_epochs` epochs."""
    return train_and_test(build, name, settings.seeds[0], epochs=settings.comparison_epochs, **options)


patch_results, patch_histories = {}, {}
for patch_size in sorted({settings.patch_size, *settings.compared_patch_sizes}):
    _, patch_histories[patch_size], patch_results[patch_size] = compare(
        lambda: build_vit(patch_size), f"ViT {patch_size}×{patch_size}")  # noqa: B023 - called now
print(f"\n{'patch':>7} {'tokens':>7} {'test accuracy':>14} {'s/epoch':>8}   ({settings.comparison_epochs} epochs each)")
for patch_size in sorted(patch_results):
    facts = patch_results[patch_size]
    print(f"{patch_size}×{patch_size:<5} {(8 // patch_size) ** 2 + 1:>7} {facts['test_accuracy']:>14.2%} "
          f"{facts['seconds_per_epoch']:>8.2f}")
    report_metric(f"vit_patch_{patch_size}_test_accuracy", facts["test_accuracy"],
                  f"ViT with {patch_size}×{patch_size} patches, seed {settings.seeds[0]}, "
                  f"{settings.comparison_epochs} epochs: test accuracy")

# %% [markdown]
# Reading the table of the stored run: after 40 epochs the 4×4 ViT is far ahead (96.4%, against
# 86.4% for 1×1 and 82.5% for 2×2), in a little over half the 2×2 model's time per epoch (0.20
# against 0.36 s). The 1×1 model's epoch took ×4.28 the 2×2 model's (1.54 against 0.36 s) for ×3.8 as many
# tokens (65 against 17), and section 1's count says why it is nearly in proportion: per block and
# example, the projections and the feed-forward layers do $32{,}768\,T$ multiply-adds at this width
# and the scores $128\,T^2$, so at 65 tokens the $T^2$ part is a fifth of the work and the count
# grows ×4.5; attention's quadratic cost takes over only at the thousands of tokens of section 1.
# One seed per size, so the few points between 1×1 and 2×2 say little. And the 1×1 and
# 2×2 runs had their lowest validation loss in their last epoch (40 of 40): they were still
# improving when the budget ended, so the table ranks how fast each size learns in 40 epochs,
# not where it would end. A hypothesis for the 4×4 lead, not tested here: each patch of 16
# pixels already holds a piece of stroke, so less has to be learned by attention. At this budget 4×4 is the better choice; whether smaller
# patches catch up with longer training this notebook does not measure. It keeps 2×2 as its main
# model because 16 tokens give attention something to do, and section 7's maps something to show.
#
# ### Augmentation
#
# Whether the shifts help depends on how long the model trains: a shifted model sees harder
# data and is still learning when a short run ends. So this ablation runs at the full length,
# `epochs` epochs, without shifts, beside section 5's run of the same seed (the same initial
# weights; only the shifts are left out):

# %%
_, unshifted_history, unshifted = train_and_test(
    build_vit, f"ViT {settings.patch_size}×{settings.patch_size}, no shifts", settings.seeds[0], max_shift=0)
shifted = vit_facts
report_metric("vit_no_augmentation_test_accuracy", unshifted["test_accuracy"],
              f"ViT without shifts, seed {settings.seeds[0]}, {settings.epochs} epochs: test accuracy")
print(f"seed {settings.seeds[0]}, {settings.epochs} epochs: with shifts {shifted['test_accuracy']:.2%} "
      f"(best validation loss {shifted['best_val_loss']:.3f}), without {unshifted['test_accuracy']:.2%} "
      f"({unshifted['best_val_loss']:.3f})")
plot_training_curves({"with shifts": vit_history, "without shifts": unshifted_history}, log_scale=("loss",))
plt.show()

# %% [markdown]
# In the stored run the two measures disagree. Test accuracy favours the shifts: 97.8% against
# 96.7%, four of 360 images. The best validation loss favours no shifts: 0.078 against 0.100.
# The curves (loss on a log scale, where the small validation differences show) tell why both
# can happen. Without shifts the model fits the training images
# perfectly (training loss near 0) and is at its best by epoch 136. With shifts it keeps
# improving until epoch 224. From one seed and 180 validation images, the evidence that shifts
# help is weak. They stay in the recipe, which was chosen with them.

# %% [markdown]
# ### Baselines
#
# A number means little alone. Three baselines on the same split, each with its setting chosen
# on the validation images:
#
# - **logistic regression** on the 64 pixels (a linear model);
# - an **SVM** with an RBF kernel (the classic strong model for this data set);
# - a **small CNN**: three 3×3 convolutions and a max-pool, trained like the ViT (same
#   optimiser, schedule shape, batches, shifts and seeds) but for only `cnn_epochs` epochs, to
#   save time. That is a handicap for the CNN, not a favour; its best epochs are printed.

# %%
flat_train, flat_validation, flat_test = (part.reshape(len(part), -1)
                                          for part in (train_images, validation_images, test_images))


def best_on_validation(make, values):
    """Fit `make(value)` on the training images for each value; return the one best on validation, refitted."""
    scores = {value: make(value).fit(flat_train, train_labels).score(flat_validation, validation_labels)
              for value in values}
    chosen = max(scores, key=scores.get)
    return chosen, make(chosen).fit(flat_train, train_labels)


logistic_c, logistic = best_on_validation(lambda c: LogisticRegression(C=c, max_iter=5000), (0.1, 1.0, 10.0))
svm_c, svm = best_on_validation(lambda c: SVC(C=c, kernel="rbf", gamma="scale"), (1.0, 10.0, 100.0))
report_metric("logistic_regression_test_accuracy", logistic.score(flat_test, test_labels),
              f"logistic regression (C={logistic_c}): test accuracy")
report_metric("svm_test_accuracy", svm.score(flat_test, test_labels), f"SVM, RBF kernel (C={svm_c}): test accuracy")

# %%
def build_cnn():
    """A small CNN for 8×8 grey digits: three 3×3 convolutions, one max-pool, a softmax layer."""
    return keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(2),  # (4, 4, 64)
        keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dropout(settings.model.dropout),
        keras.layers.Dense(10, activation="softmax"),
    ], name="small_cnn")


# %%
cnn_accuracies = np.array([train_and_test(build_cnn, "CNN", seed, epochs=settings.cnn_epochs)[2]["test_accuracy"]
                           for seed in settings.seeds])
report_metric("cnn_test_accuracy_mean", cnn_accuracies.mean(),
              f"small CNN: mean test accuracy over {len(cnn_accuracies)} seeds")
print(f"small CNN parameters: {build_cnn().count_params():,}; ViT: {vit.count_params():,}")

# %%
rows = [("logistic regression", logistic.score(flat_test, test_labels), None),
        ("SVM (RBF kernel)", svm.score(flat_test, test_labels), None),
        ("small CNN", cnn_accuracies.mean(), cnn_accuracies),
        (f"ViT {settings.patch_size}×{settings.patch_size}", vit_accuracies.mean(), vit_accuracies)]
print(f"{'model':<22} {'test accuracy':>14}   seeds")
for name, accuracy, per_seed in rows:
    seeds_text = "" if per_seed is None else "  ".join(f"{value:.2%}" for value in per_seed)
    print(f"{name:<22} {accuracy:>14.2%}   {seeds_text}")
print("best:", max(rows, key=lambda row: row[1])[0])

# %% [markdown]
# ### Which wins, and why
#
# On 1,800 tiny images the ViT has no advantage, and the table says where it stands. A
# convolution is built on two assumptions that are true of images: what matters is local (a
# 3×3 filter sees neighbouring pixels only) and a stroke means the same wherever it is (the same
# filter slides over the whole image). The SVM's kernel compares whole images pixel by pixel, and
# on centred, normalised digits that is already a strong assumption. The ViT assumes neither: it
# must *learn* which patches are neighbours (section 7 shows how far its position embeddings got)
# and that a shifted digit is the same digit — here from 1,257 images, with shifted copies as
# its only help. Dosovitskiy et al. (2021, §4.2 and Figure 3) found the same on a larger scale:
# trained on ImageNet's 1.3 million images a ViT trails comparable CNNs, and it overtakes them
# only after pre-training on 14 to 300 million images. Attention pays off when data can teach
# what a convolution is told.

# %% [markdown]
# ## 7. What the model looks at
#
# ### Attention rollout
#
# One layer's attention weights say where each token reads from *in that layer*; but a token's
# vector after layer 1 already mixes other patches. **Attention rollout** (Abnar and Zuidema,
# 2020, §3) follows the mixing through the whole stack: average each layer's heads, add the
# identity (the residual connection carries every token's own vector past the attention),
# renormalise the rows, and multiply the layers' matrices. Row 0 of the result says how much of
# the `[CLS]` output comes from each patch. Exercise 10.2 asks you to write it.

# %%
examples = np.array([np.flatnonzero(test_labels == digit)[0] for digit in range(10)])
maps = attention_maps(vit, test_images[examples])  # (D, 10, N, T, T)
rollout = attention_rollout(maps)  # (10, T, T), every row sums to 1
grid = 8 // settings.patch_size
from_patches = rollout[:, 0, 1:].reshape(-1, grid, grid)  # [CLS]'s share from each patch, on the patch grid
print("maps", maps.shape, "| rollout", rollout.shape, "| rows sum to 1:", np.allclose(rollout.sum(-1), 1.0))
predicted = vit.predict(test_images[examples], verbose=0).argmax(-1)

# %%
figure, axes = plt.subplots(2, 10, figsize=(12, 2.9))
for column, index in enumerate(examples):
    axes[0, column].imshow(test_images[index, :, :, 0], cmap="gray_r", vmin=0, vmax=1)
    axes[0, column].set_title(f"{test_labels[index]} → {predicted[column]}", fontsize=9)
    shares = axes[1, column].imshow(np.kron(from_patches[column], np.ones((settings.patch_size,) * 2)),
                                    cmap="magma", vmin=0, vmax=from_patches.max())
    axes[1, column].contour(test_images[index, :, :, 0], levels=[0.5], colors="cyan", linewidths=0.7)
    for axis in axes[:, column]:
        axis.axis("off")
figure.colorbar(shares, ax=axes[1, :], fraction=0.02, pad=0.01, label="share of [CLS]")
figure.suptitle("test digits (true → predicted) and the rollout of [CLS] over the patches (outline: the digit)")
plt.show()

# %%
on_ink = [(from_patches[column] * (extract_patches(test_images[[index]], settings.patch_size)[0].mean(-1)
                                   > 0.25).reshape(grid, grid)).sum() / from_patches[column].sum()
          for column, index in enumerate(examples)]
ink_share = [(extract_patches(test_images[[index]], settings.patch_size)[0].mean(-1) > 0.25).mean()
             for index in examples]
print(f"share of [CLS]'s patch mixture on patches with ink: {np.mean(on_ink):.0%} "
      f"(those patches are {np.mean(ink_share):.0%} of all patches)")

# %% [markdown]
# In the stored run, patches with ink supply 45% of the `[CLS]` mixture and make up 46% of the
# patches. By this measure the rollout does not single out the strokes: `[CLS]` gathers from
# the whole grid, blank patches included. A blank patch is evidence too (a 0 and an 8 differ in
# where the ink is *not*). Rollout is also only an approximation: it ignores what the
# feed-forward layers do with the mixture. Read the maps as "where information could flow
# from", not as "what the model found important".

# %% [markdown]
# ### Position embeddings
#
# The model was never told where a patch sits. Did it learn it? Compare every patch's learned
# position vector with every other's (cosine similarity): panel $(r, c)$ shows how similar the
# position embedding of the patch at row $r$, column $c$ is to all the others.

# %%
positions = keras.ops.convert_to_numpy(vit.class_token_and_positions.position_embedding)[1:]  # (M, E)
unit = positions / np.linalg.norm(positions, axis=-1, keepdims=True)
similarity = unit @ unit.T  # (M, M)
figure, axes = plt.subplots(grid, grid, figsize=(5, 4.5))
for patch, axis in enumerate(axes.ravel()):
    cosines = axis.imshow(similarity[patch].reshape(grid, grid), cmap="viridis", vmin=-1, vmax=1)
    axis.set(xticks=[], yticks=[])
figure.colorbar(cosines, ax=axes, fraction=0.04, pad=0.03, label="cosine similarity")
figure.suptitle("cosine similarity of position embeddings", fontsize=10)
plt.show()
rows, columns = np.divmod(np.arange(grid * grid), grid)
distance = np.abs(rows[:, None] - rows[None]) + np.abs(columns[:, None] - columns[None])  # steps on the grid
neighbours, far = similarity[distance == 1].mean(), similarity[distance >= 3].mean()
report_metric("position_similarity_neighbours", neighbours, "mean cosine similarity of adjacent patches' positions")
report_metric("position_similarity_far", far, "mean cosine similarity of positions 3 or more steps apart")

# %% [markdown]
# In the stored run, adjacent patches' position embeddings have a mean cosine similarity of
# 0.24, and patches three or more steps apart −0.10. The model was given 16 unrelated vectors
# and learned from the data that neighbouring patches belong together, though only roughly.

# %% [markdown]
# ## Summary
#
# - Self-attention's memory and work grow with the square of the number of tokens (the work ×3.9
#   per doubling at 4,096–8,192 tokens; the time ×2.72 and ×3.64 over the last two doublings, a
#   fitted slope of 1.66, as this CPU ran the bigger products faster): pixels as tokens do not
#   scale, patches do.
# - A patch embedding is a reshape, a transpose and one shared linear map — the same arithmetic
#   as a convolution with kernel and stride equal to the patch size.
# - The ViT is notebook 05's encoder on a sequence of patch vectors, with a `[CLS]` token and
#   learned position embeddings; nothing in it knows that images are 2-D.
# - On 1,800 small digits the ViT (about 97.7% in the stored run, mean of three seeds) does not
#   win: a small CNN and an SVM do a little better. What a convolution is told, the ViT must
#   learn from data, and 1,257 training images are few for that.
# - Attention rollout follows the mixing through all layers, and the learned position
#   embeddings show how much of the image's layout the model recovered from data alone.
#
# ## Graded exercises
#
# Complete each function where it says `raise NotImplementedError(...)`, then run the cell after
# it: `check` tells you at once whether your function is right, and if not, what differs.
# The rest of the notebook does not depend on your answers. Both are plain NumPy; 5 points,
# and our estimate of the time they take, not a measurement: about 45 minutes.
#
# ### Exercise 10.1 — cutting images into patches (2 points)
#
# Write `patchify(images, patch_size)`: `images` is `(B, height, width, C)` with height and width
# divisible by `patch_size` P. Return `(B, M, P·P·C)` with M = (height/P)·(width/P): patch m is the
# m-th reading left to right, top to bottom, and its vector lists the patch's pixels row by row, each pixel's
# channels together (the order of `keras.ops.image.extract_patches`).

# %% nbgrader={"grade": false, "grade_id": "exercise_10_1", "locked": false, "schema_version": 3, "solution": true}
def patchify(images, patch_size):
    """images (B, height, width, C), int P -> (B, M, P·P·C): non-overlapping patches in reading order."""
    ### BEGIN SOLUTION
    batch, height, width, channels = images.shape
    grid = images.reshape(batch, height // patch_size, patch_size, width // patch_size, patch_size, channels)
    grid = grid.transpose(0, 1, 3, 2, 4, 5)  # (B, rows, columns, P, P, C)
    return grid.reshape(batch, -1, patch_size * patch_size * channels)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_10_1", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from transformer_course.exercises import check

check("10.1", patchify)
### BEGIN HIDDEN TESTS
from transformer_course_grader import evaluate_hidden

assert evaluate_hidden("10.1", patchify, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ### Exercise 10.2 — attention rollout (3 points)
#
# Write `roll_out_attention(attention_weights)`: `attention_weights` is `(D, B, N, T, T)`,
# layer 1 first, every row a distribution. For each layer, average the heads, add the identity
# matrix and divide each row by its sum; then combine the layers so that the result for $D$
# layers is $\tilde A_D \cdots \tilde A_2 \tilde A_1$ (the last layer's matrix on the left). Return
# `(B, T, T)`.

# %% nbgrader={"grade": false, "grade_id": "exercise_10_2", "locked": false, "schema_version": 3, "solution": true}
def roll_out_attention(attention_weights):
    """attention weights (D, B, N, T, T) -> rollout (B, T, T), rows summing to 1."""
    ### BEGIN SOLUTION
    tokens = attention_weights.shape[-1]
    result = np.broadcast_to(np.eye(tokens), attention_weights.shape[1:2] + (tokens, tokens))
    for layer in attention_weights:
        mixed = layer.mean(axis=1) + np.eye(tokens)
        result = (mixed / mixed.sum(axis=-1, keepdims=True)) @ result
    return result
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_10_2", "locked": true, "points": 3, "schema_version": 3, "solution": false}
check("10.2", roll_out_attention)
### BEGIN HIDDEN TESTS
assert evaluate_hidden("10.2", roll_out_attention, seed=7).passed
### END HIDDEN TESTS

# %% [markdown]
# ## Exercise (ungraded)
#
# Give the ViT the CNN's advantage by hand: replace the learned position embeddings with fixed
# 2-D sinusoidal ones (half the width encodes the row, half the column, as in notebook 04) and
# compare the test accuracy and the position-similarity panels. Then train the 2×2 ViT on 10%,
# 30% and 100% of the training images and plot its test accuracy beside the CNN's: where does
# the gap between them close, if it does?

# %% [markdown]
# ## Written question (2 points, graded by your instructor)
#
# **Question 10.w1.** On these 1,800 digits the ViT (mean of three seeds) scores a little below
# the small CNN and the SVM in the comparison table. Is that difference separated from the spread of
# the ViT's seeds? Whatever your answer, explain what a convolution is told about images that the ViT
# must learn from data, and say one change you would try first to help the ViT here.

# %% [markdown] nbgrader={"grade": true, "grade_id": "written_10_1", "locked": false, "points": 2, "schema_version": 3, "solution": true}
# ### BEGIN SOLUTION
# **Rubric (2 points).** 1 point: reads the table: the ViT's mean (about 97.7%) is within about its
# seeds' spread (±1.4 points) of the SVM's 98.3% and the CNN's 98.4%, so the ranking is not
# established by these runs. 1 point: a convolution is told locality and translation equivariance
# (the same small filter everywhere); the ViT's attention and position embeddings must learn which
# patches are neighbours from 1,800 images. Sensible first changes: more augmentation (shifts),
# smaller patches with fewer layers, pre-training on more images, or a convolutional stem.
# ### END SOLUTION
