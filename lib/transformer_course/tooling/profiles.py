"""Run profiles: the settings every notebook reads.

Two profiles exist:

* ``smoke`` — the whole series runs on a 2-core CPU in minutes. Continuous integration uses it.
  Accuracies from a smoke run mean nothing and nothing asserts them. On TensorFlow, its functions
  (Keras' train and predict steps among them) run eagerly (:attr:`Profile.eager_functions`): tracing
  a graph for every small model cost more than the few steps it runs (notebook 08: 266 s traced,
  149 s eager, on 2 cores). The traced path is the full profile's, and the unit tests train in it.
* ``full`` — the settings behind every number the course reports.

The profile comes from the ``name`` argument, else the ``COURSE_PROFILE`` environment variable,
else ``full``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = ["PROFILE_NAMES", "DEFAULT_PROFILE", "Profile", "Settings", "profile", "checkpoint_path"]

DEFAULT_PROFILE = "full"

# Settings per profile, then per notebook id: the full profile here, the smoke profile below as
# overrides of it.
_SETTINGS: dict[str, dict[str, dict[str, Any]]] = {
    "full": {
        "01": {
            # The lecture notes' setup: sequences of 4 values in 1..9, one-hot width 10.
            "train_size": 2000,
            "test_size": 200,
            "n_timesteps_in": 4,
            "n_features": 10,
            "units": 16,
            "batch_size": 10,
            "epochs": 60,
            "teacher_forcing_epochs": 60,
            # The bottleneck sweep: longer sequences over a 16-wide vocabulary.
            "sweep_lengths": (4, 8, 12, 16, 20),
            "sweep_n_features": 16,
            "sweep_train_size": 10000,
            "sweep_test_size": 1000,
            "sweep_units": 64,
            "sweep_batch_size": 32,
            "sweep_epochs": 40,
        },
        "02": {
            # The lecture notes' setup for the three score functions.
            "train_size": 2000,
            "test_size": 200,
            "n_timesteps_in": 4,
            "n_features": 10,
            "units": 16,
            "batch_size": 10,
            "epochs": 100,  # an upper bound: training stops when validation loss stalls
            "patience": 10,
            # The length sweep: the same budget for the model without attention and each score.
            "sweep_lengths": (4, 8, 16, 20),
            "sweep_n_features": 16,
            "sweep_train_size": 10000,
            "sweep_test_size": 1000,
            "sweep_units": 64,
            "sweep_batch_size": 32,
            "sweep_epochs": 15,
            "sweep_patience": 4,
        },
        "03": {
            # Reviews used to study lengths and adapt the vectoriser (all 25,000 training reviews).
            "imdb_reviews": 25000,
            "bpe_merges": 8000,  # byte-level BPE learned from the same reviews: 256 + 8,000 tokens
            "max_tokens": 20000,
            "output_sequence_length": 600,
            # Skip-gram with negative sampling on the vectorised reviews (section 9).
            "word_vector_reviews": 25000,
            "window": 2,
            "negatives": 5,
            "word_vector_dim": 100,
            "word_vector_batch": 1024,
            "word_vector_learning_rate": 1e-3,
        },
        "04": {
            # Random query/key pairs per width in the "why divide by sqrt(d_k)" experiment.
            "scaling_samples": 2000,
            "scaling_widths": (4, 16, 64, 256, 1024),
        },
        "05": {
            # The residual-connection experiment: a deep stack of dense layers, one batch.
            "depth": 20,
            "width": 64,
            "batch_size": 256,
        },
        "06": {
            # Chollet, "Deep Learning with Python", 2nd ed., §11.4: the whole IMDB training set
            # less 20% held out, 20,000 words, reviews cut at 600 tokens, E=256, 2 heads, F=32.
            "train_reviews": None,  # None = all of them
            "test_reviews": None,
            "validation_fraction": 0.2,
            "max_tokens": 20000,
            "sequence_length": 600,
            "batch_size": 32,
            "bucket_boundaries": (64, 128, 192, 256, 384, 512, 601),
            "jit_compile": True,
            # The architecture: the model builder's keyword arguments (settings.model).
            "model": {"embed_dim": 256, "num_heads": 2, "intermediate_dim": 32},
            "epochs": 6,  # an upper bound: training stops when validation loss stalls
            "patience": 2,
            "baseline_epochs": 10,
        },
        "07": {
            # All 118,964 Tatoeba pairs, split 70/15/15 by pair with a fixed seed.
            "pairs": None,  # None = all of them
            "split_seed": 0,
            "source_vocabulary_size": 15000,
            "target_vocabulary_size": 15000,
            "length_quantile": 0.999,  # sequence lengths: cover this share of training sentences
            # Sized for a 2-core CPU and chosen by validation loss: two blocks each side, E=256
            # (8 heads of 32), F=1024, tied target embeddings, label smoothing, warm-up then cosine.
            # The architecture: the model builder's keyword arguments (settings.model).
            "model": {
                "embed_dim": 256,
                "intermediate_dim": 1024,
                "num_heads": 8,
                "num_layers": 2,
                "dropout": 0.2,
                "tie_embeddings": True,
            },
            "label_smoothing": 0.1,
            "learning_rate": 1e-3,  # the peak of the schedule
            "warmup_steps": 1000,
            "batch_size": 128,
            "bucket_boundaries": (5, 7, 9, 11, 13, 16, 20),  # batches grouped by target length
            "epochs": 9,  # the schedule ends here (3.5 min an epoch on 2 cores); or earlier if validation loss stalls
            "patience": 2,
            "validation_bleu_sentences": 1000,  # the fixed sample scored after every epoch
            "beam_width": 4,
            "length_penalty_alpha": 0.6,
        },
        "08": {
            # Pre-training text: the 25,000 IMDB training reviews and the archive's 50,000 unlabelled
            # reviews (labels unused), less every text that also occurs in the test split.
            "pretraining_reviews": None,  # None = all of them
            "validation_reviews": 1500,  # held out of pre-training: the held-out masked-LM accuracy
            "word_vocabulary_size": 10000,  # the whole-word vocabulary of the first edition, for its [UNK] rate
            "vocabulary_size": 8000,  # WordPiece pieces, special tokens included
            "vocab_sample": 10000,  # reviews the WordPiece vocabulary is computed on (about 60 s)
            "sequence_length": 128,  # [CLS] 126 pieces [SEP], pre-training and fine-tuning alike
            "max_predictions": 20,  # masked positions scored per input (15% of 126 is about 19), as BERT at 128
            # The architecture: the model builder's keyword arguments (settings.model); ELECTRA's
            # discriminator has it too, and its generator a quarter of its width (Clark et al., 2020, §3.2).
            "model": {"embed_dim": 128, "num_heads": 4, "intermediate_dim": 512, "num_layers": 2},
            "generator_fraction": 0.25,
            "batch_size": 64,
            "learning_rate": 1e-3,  # AdamW: warm-up, the peak held, then a cosine decay (both objectives)
            "warmup_steps": 300,
            "decay_fraction": 0.15,  # the last 15% of the updates decay
            # Pre-training in updates, the same on every machine: the masked LM's 5,824 are what 16 minutes of its
            # update gave on the machine that recorded the course (0.165 s); ELECTRA trains at equal compute, its
            # update costing 1.216 masked-LM updates there (0.200 s against 0.165 s, interleaved, 08's recorded run).
            "pretraining_updates": 5824,
            "electra_update_cost": 1.216,
            "timing_steps": 20,  # updates timed per objective on this machine (after compiling; their median)
            "rounds": 4,  # a held-out score and a checkpoint after each quarter of the updates
            "validation_segments": 2048,  # held-out inputs, masked once: the same blanks after every round
            # Fine-tuning on labelled reviews, every arm the same way.
            "classifier_pooling": "mean",  # the classifier reads the mean of the encoder's outputs ("cls": BERT's
            # pooled [CLS] output, the ungraded exercise)
            "encoder_dropout": 0.1,  # in the encoder while fine-tuning, every arm (BERT's 0.1)
            "classifier_dropout": 0.1,  # before each fine-tuned head's output layer
            "label_sizes": (200, 1000, 3000, 6000),
            "seed_counts": (5, 5, 3, 3),  # seeds 0, 1, ... at each label size: paired, the same draw for every arm
            "electra_label_sizes": (200, 1000, 3000),  # ELECTRA's arm (its hypothesis: at 1,000 and 3,000)
            "all_labels": None,  # None = every labelled training review but the validation ones
            "all_labels_arms": (),  # arms given one run with every label, beside 06's record (~5 min each)
            "label_validation_reviews": 1000,  # labelled training reviews kept for validation, never trained on
            "learning_rates": (3e-4, 1e-3, 3e-3),  # the grid, per arm, at grid_labels (seed 0), chosen on validation
            "grid_labels": 1000,
            "fine_tune_updates": 600,  # the epoch cap: enough epochs for about this many updates ...
            "fine_tune_max_epochs": 40,  # ... but at most this many, and at least min_epochs
            "fine_tune_min_epochs": 2,  # every label: 2 epochs of 750 updates
            "fine_tune_patience": 3,
            "warmup_fraction": 0.1,  # BERT's fine-tuning schedule: warm-up, then linear decay to 0 at the cap
            "fine_tune_batch_size": 32,
            "test_sample": 5000,  # a fixed sample of test reviews for the curve; every test review for all labels
            "probe_reviews": 5000,  # frozen-encoder probe: training reviews for the logistic regression
            "head_sentences": 4000,  # the tagging and span tasks: training sentences (test: 1,000)
            "head_epochs": 3,
            "jit_compile": True,  # XLA for pre-training: 1.3x the inputs/s on a CPU
            # Not for fine-tuning: a whole run took 0.70x the time without XLA here (benchmarks/fine_tuning_xla.py).
            "fine_tune_jit_compile": False,
        },
        "09": {
            # IMDB reviews as raw running text: the 25,000 training and 50,000 unlabelled reviews (labels
            # unused), less every text that also occurs in the test split and every second copy; the first
            # validation_reviews of them held out. Scored on the first 2,500 test reviews (a fixed sample: the
            # reviews come shuffled).
            "train_reviews": None,  # None = all of them
            "validation_reviews": 1000,
            "test_reviews": 2500,
            "bpe_reviews": 25000,  # the texts byte-pair encoding learns its merges from (about 15 s)
            "merges": 8000,
            "chunk_length": 256,
            # dropout: less than one pass over the text: nothing is seen twice, nothing to regularise
            # The architecture: the model builder's keyword arguments (settings.model): section 4's model, and the
            # shape of every width the sweep trains (the feed-forward four times the width).
            "model": {"embed_dim": 256, "num_heads": 4, "intermediate_dim": 1024, "num_layers": 2, "dropout": 0.0},
            "batch_size": 32,
            # Training sized by compute (training_flops_per_token x tokens), the same on every machine. The IsoFLOP
            # sweep: each width for sweep_compute operations at each peak rate (AdamW, warm-up over warmup_fraction
            # of the updates, cosine decay); 64 to 256 wide: 0.45 to 1.39 s an update with XLA on the AVX-512 machine
            # that records the course, about 14 minutes for the eight runs there.
            "sweep_embed_dims": (64, 96, 128, 256),
            "sweep_learning_rates": (2e-3, 6e-3),
            "sweep_compute": 1.0e13,
            # The final run: 8 times the sweep's compute, at the width the sweep's valley moves to (N_opt ∝ C^0.5,
            # Hoffmann et al., 2022), in rounds with a validation and a kept state after each (12 to 18 minutes).
            "final_compute": 8.0e13,
            "scaling_exponent": 0.5,
            "warmup_fraction": 0.1,
            "rounds": 6,
            "jit_compile": True,  # XLA: about twice the training speed on a CPU for this model
            "compressor_reference_reviews": None,  # the compressors also on this many test reviews (None = all)
            "gpt2_sequence_length": 256,  # GPT-2 (where it can be downloaded): rows and cache of this length
            "gpt2_test_reviews": 100,
            # Generation and the sampling measurements.
            "generation_length": 40,
            "knob_prompts": 32,  # test-review openings continued at every setting
            "prompt_length": 8,
            "temperatures": (0.2, 0.5, 0.8, 1.0, 1.2, 1.5),
            "top_ps": (0.5, 0.7, 0.8, 0.9, 0.95, 1.0),
            "top_ks": (1, 5, 20, 50, 200, 1000),
            # The model as a compressor (arithmetic coding): whole test reviews of the scored sample up to this
            # many characters, and two texts of other kinds (Tatoeba's English sentences; the source of the
            # package's byte-pair encoder) up to other_characters each; streams coded side by side.
            "compression_characters": 100_000,
            "other_characters": 15_000,
            "compression_streams": 8,  # 8 rows a step: about 3x the characters a second of one (benchmarks/)
            "compressor_timing_repeats": 5,  # each general-purpose compressor timed this often (the median)
        },
        "11": {
            # 09's text and tokens: training and unlabelled reviews less the test split's texts, the first
            # validation_reviews held out; a fixed sample of test_reviews test reviews scored.
            "train_reviews": 30000,  # enough text: no run reads more than a fifth of it
            "validation_reviews": 200,
            "test_reviews": 500,
            "bpe_reviews": 25000,
            # 09's byte-level BPE with a quarter of its merges: the softmax over the vocabulary is most of an
            # update's cost on a CPU (2,000 merges: 1.1 s an update here against 2.1 s with 09's 8,000).
            "merges": 2000,
            "chunk_length": 256,
            # One change at a time: the Llama-style block with rotary or with learned positions, nothing else changed.
            "model": {"embed_dim": 256, "num_heads": 4, "num_layers": 2, "dropout": 0.0},
            "intermediate_dim": 688,  # SwiGLU, three matrices: 2/3 of 1,024, rounded up to a multiple of 8
            "num_key_value_heads": 2,  # grouped queries: 4 query heads share 2 key/value heads
            "batch_size": 32,
            # AdamW peaks of 09's warm-up + cosine schedule, chosen per arm on the validation text at seed 0: 4e-3,
            # the rate a Llama-style block of this size chose over 2e-3 and 8e-3 at 320 updates, and twice it.
            "position_learning_rates": (4e-3, 8e-3),
            "warmup_steps": 30,
            "ablation_updates": 120,  # every run: the same number of updates of batch_size rows
            "rounds": 4,  # validation after each quarter of a run's updates
            "seeds": (0, 1, 2),  # paired; seed 0 also chooses each arm's learning rate (on the validation text)
            # Longer than trained: models on rows of context_length (chunk_length's rows cut in four), read at twice
            # it; rotary and no positions, the same rate (the rotary arm's), context_updates each, two paired seeds.
            "context_length": 64,
            "context_updates": 600,
            "context_seeds": (0, 1),
            "interpolation_factor": 2.0,  # Position Interpolation: the rotary models' positions divided by it
            # A decoding step's time with a key/value cache of these lengths, G = 4, 2 and 1 key/value heads.
            "decoding_lengths": (1024, 2048, 4096),
            "decoding_rounds": 30,  # interleaved timings of each (length, G)
            "decoding_tokens": 20,  # steps in one timing, so the timer's own noise is a twentieth of a step's
            "jit_compile": True,
        },
        "12": {
            # Notebook 11's text and tokens, and its Llama-style block with rotary positions (filled in below);
            # rounds: validation after each quarter of the base's updates; seed 0 is also the base's, and the one
            # that chooses each arm's learning rate.
            # The classifier's base: seed 0, at the peak rate notebook 11's ablation chose for rotary positions (its
            # record's rotary_peak_learning_rate; a test holds the two equal), trained three times as long as an
            # ablation run.
            "base_learning_rate": 8e-3,
            "base_updates": 360,
            # The classifier on that base: 08's protocol at 1,000 labels, four arms, the same seeds.
            "label_reviews": 1000,
            "label_validation_reviews": 500,
            # The last 128 tokens of each review (its ending holds the verdict): an epoch of the adapted arms took
            # 10 s here against 22 s at 256, which pays for choosing every arm's epochs by validation.
            "classifier_length": 128,
            "classifier_test_reviews": 2000,  # a fixed sample of the test split
            "classifier_dropout": 0.1,  # on the pooled vector
            # Each arm's peak rates (warm-up over a tenth, then linear decay), chosen on the validation reviews;
            # LoRA's about ten times full fine-tuning's (Schulman and Thinking Machines, 2025), and one step below.
            # LoRA on the attention projections only trains at the rate LoRA on every projection chose; the head on
            # the randomly initialised model (a floor) on the head's grid.
            "fine_tune_learning_rates": {
                "head": (1e-3, 3e-3, 1e-2, 3e-2, 1e-1),
                "lora_all": (3e-3, 1e-2, 3e-2),
                "full": (3e-4, 1e-3, 3e-3, 1e-2),
            },
            "lora_rank": 4,
            "lora_alpha": 8.0,  # fixed, so the scale alpha / r falls as the rank grows (Hu et al., 2021, §4.1)
            # rsLoRA's scale alpha / sqrt(r) (Kalajdzievski, 2023), its alpha chosen so that at lora_rank both
            # scales are 2: the sweep's rank-4 run is one run for both.
            "rank_stabilized_alpha": 4.0,
            "lora_ranks": (1, 4, 16),  # the rank sweep: seed 0, LoRA on attention and feed-forward
            # Every arm's epochs chosen on the validation reviews, as its rate: at most fine_tune_max_epochs (the
            # schedule's length), stopped after fine_tune_patience epochs without a lower validation loss.
            "fine_tune_max_epochs": 8,
            "fine_tune_patience": 3,
            # The head alone reads the frozen model's pooled vectors, computed once: an epoch costs almost nothing,
            # so it gets more epochs and more patience (its validation loss is noisy from epoch to epoch).
            "head_epochs": 30,
            "head_patience": 10,
            "fine_tune_batch_size": 32,
            # The classifiers without XLA: measured here, it gives a fine-tuning step no speed and slows predicting.
            "fine_tune_jit_compile": False,
            # The bag-of-words floor: logistic regression's inverse regularization strengths, chosen on validation.
            "bag_of_words_strengths": (0.01, 0.1, 1.0, 10.0, 100.0),
            # Bits per character against bits per weight: (bits, weights a scale; None for one scale a row).
            "quantization_formats": ((8, None), (4, None), (4, 128), (4, 32), (3, 32), (2, 32)),
            # Gradient accumulation: one update of fine_tune_batch_size rows made in this many micro-batches.
            "accumulation_steps": 4,
            # int8 and generation speed: medians of timing_repeats interleaved timings each.
            "generation_prompts": 8,
            "generation_length": 64,
            "timing_repeats": 5,
            # Several devices: a small model, the same global batch, on 4 virtual CPU devices and on 1.
            "virtual_devices": 4,
            "parallel_steps": 6,
        },
        "13": {
            # The task: integer addition written as text, operands of 1 to max_digits digits; a fifth of the
            # unordered pairs held out of every training text.
            "max_digits": 2,
            "held_out_share": 0.2,
            # The base model: a Llama-style decoder over characters (byte-level, no merges), pre-trained on prose
            # sentences stating sums of training pairs, never in the question/answer format.
            "prose_sentences": 60000,
            "sequence_length": 128,  # room for a few-shot prompt: two solved examples and the question
            "model": {"embed_dim": 128, "num_heads": 4, "num_layers": 3},
            "intermediate_dim": 344,
            "num_key_value_heads": 4,
            "batch_size": 32,
            "base_learning_rate": 3e-3,
            "warmup_steps": 100,
            "base_updates": 2400,
            "rounds": 4,
            "held_out_problems": 400,  # every accuracy: the same held-out problems, greedy decoding and sampled
            "validation_problems": 200,  # held-out problems too, no pair shared with those: the rates are chosen here
            "training_problems": 400,  # pairs the prose stated: what is remembered, against what is computed
            "shots": 2,
            "evaluation_samples": 8,  # answers sampled (T = 1) per problem: pass@1, maj@8, pass@k
            # Supervised fine-tuning: the prompt masked or not, at equal updates; and the curve against examples.
            "sft_examples": 8000,
            "sft_epochs": 4,  # 1,000 updates: fewer left the seeds far apart
            "sft_learning_rate": 1e-3,  # the peak: a tenth warming up, then a cosine decay
            "sft_seeds": (0, 1, 2),  # paired: each seed's order of the examples, the same for both arms
            "sft_curve_examples": (250, 1000, 3000, 8000),  # the last, from the base model: seed 0's run, reused
            # Preferences: answers sampled from the SFT model, labelled by the checker; DPO against the frozen SFT one.
            "dpo_questions": 1000,
            "dpo_answers_each": 4,
            "dpo_beta": 0.1,
            "dpo_learning_rates": (3e-6, 1e-5, 3e-5, 1e-4),  # each in full at seed 0, the best on validation kept
            "dpo_epochs": 3,
            "dpo_seeds": (0, 1, 2),  # the order of the pairs: DPO, DPO + NLL (RPO) and SFT on the chosen answers
            "rpo_nll_coefficient": 1.0,  # alpha of the NLL term on the chosen answer (Pang et al., 2024)
            "temperature": 1.0,
            # GRPO: G answers to each of Q questions an update, the checker's reward; the rate chosen on validation.
            "grpo_updates": 40,  # with the grid below and three seeds of three arms: the run within 45 minutes
            "grpo_questions": 16,
            "grpo_answers_each": 8,
            "grpo_steps_each": 2,  # gradient steps on each batch of samples (the first at ratio 1)
            "grpo_learning_rates": (1e-5, 3e-5, 1e-4, 3e-4),  # each in full at seed 0; validation reward picks
            "grpo_seeds": (0, 1, 2),  # the questions drawn and the answers sampled
            "grpo_clip_epsilon": 0.2,
            "grpo_kl_coefficient": 0.04,  # the ablation: 0 (no KL term), at the chosen rate, every seed
            # The control: rejection-sampling fine-tuning on as many samples as a GRPO run draws.
            "rft_learning_rates": (3e-5, 1e-4, 3e-4),  # one epoch over the accepted answers, chosen as GRPO's is
            "jit_compile": True,
        },
        "10": {
            # scikit-learn's 1,797 digits (8×8), split 70/10/20 by class with a fixed seed.
            "split_seed": 0,
            "validation_fraction": 0.1,
            "test_fraction": 0.2,
            # The cost of attention: one multi-head attention layer, batch 1, at these lengths.
            "attention_lengths": (16, 64, 256, 1024, 2048, 4096, 8192),
            "attention_width": 64,
            "attention_repeats": 3,
            # The ViT: 2×2 patches (16 tokens + [CLS]), four pre-norm blocks of width 64.
            "patch_size": 2,
            "compared_patch_sizes": (1, 4),  # beside 2: 64 tokens ("pixels as tokens") and 4 tokens
            # The architecture: the model builder's keyword arguments (settings.model).
            "model": {"embed_dim": 64, "num_heads": 4, "intermediate_dim": 128, "num_layers": 4, "dropout": 0.1},
            "max_shift": 1,  # augmentation: every training image moved by up to 1 pixel, each epoch
            "batch_size": 128,
            "learning_rate": 2e-3,  # AdamW, the peak of a warm-up + cosine schedule
            "weight_decay": 0.05,
            "warmup_epochs": 10,
            "epochs": 300,
            "patience": 300,  # the schedule runs to its end; the best validation epoch is kept
            "seeds": (0, 1, 2),
            "comparison_epochs": 40,  # section 6's single-seed patch-size runs
            "cnn_epochs": 100,  # the CNN baseline, three seeds
            "jit_compile": True,  # XLA: Keras leaves it off on a CPU; this small model trains faster with it
        },
    },
}

# Notebook 12 trains notebook 11's rotary block on notebook 11's text: the settings of both, stated once (11's).
_SHARED_WITH_11 = (
    "train_reviews", "validation_reviews", "test_reviews", "bpe_reviews", "merges", "chunk_length", "model",
    "intermediate_dim", "num_key_value_heads", "batch_size", "warmup_steps", "rounds", "seeds", "jit_compile",
)  # fmt: skip
_SETTINGS["full"]["12"] = {name: _SETTINGS["full"]["11"][name] for name in _SHARED_WITH_11} | _SETTINGS["full"]["12"]

# The smoke profile changes only what makes a notebook slow; every other setting is the full
# profile's. A key here that the full profile lacks is an error (a test checks it). Its functions run
# eagerly, where a training step of these tiny models costs about the same whatever its batch: so the
# smoke batches are large, for few steps (notebook 10 alone: 27 s at batch 512 against 48 s at 128).
_SMOKE_OVERRIDES: dict[str, dict[str, Any]] = {
    "01": {
        "train_size": 200,
        "test_size": 40,
        "batch_size": 100,
        "epochs": 2,
        "teacher_forcing_epochs": 2,
        "sweep_lengths": (4, 8),
        "sweep_train_size": 200,
        "sweep_test_size": 40,
        "sweep_units": 16,
        "sweep_batch_size": 200,
        "sweep_epochs": 1,
    },
    "02": {
        "train_size": 200,
        "test_size": 40,
        "batch_size": 100,
        "epochs": 1,
        "patience": 1,
        "sweep_lengths": (6,),  # one length runs every code path with half the sweep's models
        "sweep_train_size": 200,
        "sweep_test_size": 40,
        "sweep_units": 16,
        "sweep_batch_size": 200,
        "sweep_epochs": 1,
        "sweep_patience": 1,
    },
    "03": {"imdb_reviews": 1000, "bpe_merges": 300, "word_vector_reviews": 10},
    "04": {"scaling_samples": 200},
    "05": {},
    "06": {
        "train_reviews": 800,
        "test_reviews": 400,
        "sequence_length": 128,  # attention's cost grows with the square of the length
        "batch_size": 200,
        "bucket_boundaries": (64, 129),
        "model": {"embed_dim": 32, "intermediate_dim": 16},
        "epochs": 1,
        "patience": 1,
        "baseline_epochs": 1,
        "jit_compile": False,
    },  # compiling every bucket shape costs more than it saves here
    "07": {
        "pairs": 1500,
        "source_vocabulary_size": 2000,
        "target_vocabulary_size": 2000,
        "model": {"embed_dim": 32, "intermediate_dim": 64, "num_heads": 2, "num_layers": 1},
        "batch_size": 256,  # 9 eager steps, one or two a length bucket: the epoch took 8 s here against 14 s at 64
        "warmup_steps": 4,
        "epochs": 1,
        "patience": 1,
        "validation_bleu_sentences": 50,
        "beam_width": 2,
    },
    "08": {
        "pretraining_reviews": 900,
        "validation_reviews": 100,
        "word_vocabulary_size": 1000,
        "vocabulary_size": 600,
        "vocab_sample": 30,  # WordPiece's vocabulary learner: 3 s on 30 reviews, 10 s on 100 (294 pieces of 600)
        "sequence_length": 48,
        "max_predictions": 8,
        "model": {"embed_dim": 32, "num_heads": 2, "intermediate_dim": 64, "num_layers": 1},
        "warmup_steps": 4,
        "pretraining_updates": 2,  # 1 eager update a round, each objective
        "timing_steps": 1,
        "rounds": 2,
        "validation_segments": 64,
        "label_sizes": (60,),
        "seed_counts": (1,),
        "electra_label_sizes": (60,),
        "all_labels": 240,
        # No arm, as in the full profile: a run with every label scores all 25,000 test reviews, about
        # 25 s of the suite's 08 for an arm the recorded run leaves out.
        "all_labels_arms": (),
        "label_validation_reviews": 100,
        "learning_rates": (1e-3,),
        "grid_labels": 60,
        "fine_tune_updates": 8,
        "fine_tune_max_epochs": 1,
        "fine_tune_min_epochs": 1,
        "fine_tune_patience": 1,
        "test_sample": 200,
        "probe_reviews": 200,
        "head_sentences": 64,  # 2 eager updates a head (5 at 200)
        "head_epochs": 1,
        "jit_compile": False,
    },  # compiling costs more than a tiny run saves
    "09": {
        "train_reviews": 600,
        "validation_reviews": 25,  # each held-out score: 6 eager batches (2.3 s here at 50 reviews, 16 batches)
        "test_reviews": 100,
        "bpe_reviews": 300,
        "merges": 300,
        "chunk_length": 32,
        "model": {"embed_dim": 32, "num_heads": 2, "intermediate_dim": 64, "num_layers": 1},
        "sweep_embed_dims": (16, 32),
        "sweep_learning_rates": (2e-3,),
        "sweep_compute": 1.0e8,  # 1 eager update a width (the model at width 32: 2.0e8 operations an update)
        "final_compute": 8.0e8,  # 4 eager updates at width 32
        "rounds": 2,
        "gpt2_test_reviews": 4,
        "compressor_reference_reviews": 300,
        "generation_length": 8,
        "knob_prompts": 4,
        "temperatures": (0.5, 1.0),
        "top_ps": (0.9, 1.0),
        "top_ks": (5,),
        "compression_characters": 600,
        "other_characters": 100,
        "compression_streams": 4,
        "compressor_timing_repeats": 1,
        "jit_compile": False,
    },  # compiling costs more than one tiny epoch saves
    "11": {
        "train_reviews": 300,
        "validation_reviews": 15,  # each held-out score: 4 eager batches (1 s here at 30 reviews, 8 batches)
        "test_reviews": 20,
        "bpe_reviews": 150,
        "merges": 200,
        "chunk_length": 32,
        "model": {"embed_dim": 32, "num_heads": 4, "num_layers": 1},
        "intermediate_dim": 48,
        "context_length": 16,
        "context_updates": 4,
        "context_seeds": (0, 1),
        "decoding_lengths": (64,),
        "decoding_rounds": 2,
        "decoding_tokens": 2,
        "warmup_steps": 2,
        "ablation_updates": 4,
        "rounds": 2,
        "seeds": (0,),
        "position_learning_rates": (2e-3,),
        "jit_compile": False,
    },  # compiling costs more than a tiny run saves
    "12": {  # notebook 11's text and block settings are filled in below
        "base_updates": 4,
        "base_learning_rate": 2e-3,
        "rounds": 2,
        "seeds": (0,),
        "label_reviews": 32,
        "label_validation_reviews": 16,
        "classifier_length": 32,
        "classifier_test_reviews": 32,
        "fine_tune_learning_rates": {"head": (1e-3,), "lora_all": (1e-3,), "full": (1e-3,)},
        "lora_ranks": (1, 4),
        "fine_tune_max_epochs": 1,
        "fine_tune_patience": 1,
        "head_epochs": 2,
        "bag_of_words_strengths": (1.0,),
        "quantization_formats": ((8, None), (4, 16)),
        "generation_prompts": 2,
        "generation_length": 4,
        "timing_repeats": 2,
        "parallel_steps": 2,
        "jit_compile": False,
    },  # compiling costs more than a tiny run saves
    "13": {
        "prose_sentences": 400,
        "model": {"embed_dim": 16, "num_heads": 2, "num_layers": 1},
        "intermediate_dim": 32,
        "num_key_value_heads": 2,
        "base_updates": 4,
        "rounds": 2,
        "warmup_steps": 2,
        "held_out_problems": 8,
        "validation_problems": 8,
        "training_problems": 8,
        "evaluation_samples": 2,
        "sft_examples": 32,
        "sft_epochs": 1,
        "sft_seeds": (0,),
        "sft_curve_examples": (8, 32),
        "dpo_questions": 16,
        "dpo_learning_rates": (1e-4,),
        "dpo_epochs": 1,
        "dpo_seeds": (0,),
        "grpo_updates": 2,
        "grpo_questions": 2,
        "grpo_answers_each": 4,
        "grpo_learning_rates": (1e-4,),
        "grpo_seeds": (0,),
        "rft_learning_rates": (1e-4,),
        "jit_compile": False,
    },  # compiling costs more than a tiny run saves
    "10": {
        "attention_lengths": (16, 64, 256),
        "batch_size": 512,
        "attention_repeats": 1,
        "model": {"embed_dim": 16, "num_heads": 2, "intermediate_dim": 32, "num_layers": 1},
        "warmup_epochs": 0,
        "epochs": 1,  # each model: 2 eager updates (4 at 2 epochs; a step costs about 0.55 s here)
        "compared_patch_sizes": (4,),  # 1×1 patches (65 tokens) cost most; tests/test_vision.py builds them
        "comparison_epochs": 1,
        "cnn_epochs": 1,
        "patience": 1,
        "seeds": (0,),
        "jit_compile": False,
    },  # compiling five small models costs more than two epochs save
}


def _overridden(values: dict, overrides: dict) -> dict:
    """``values`` with ``overrides`` on top; a group of settings (``model``) is overridden key by key."""
    merged = {**values, **overrides}
    for key, value in overrides.items():
        if isinstance(value, dict):
            merged[key] = {**values[key], **value}
    return merged


_SMOKE_OVERRIDES["12"] = {
    name: _SMOKE_OVERRIDES["11"][name] for name in _SHARED_WITH_11 if name in _SMOKE_OVERRIDES["11"]
} | _SMOKE_OVERRIDES["12"]
_SETTINGS["smoke"] = {
    notebook: _overridden(values, _SMOKE_OVERRIDES.get(notebook, {})) for notebook, values in _SETTINGS["full"].items()
}

PROFILE_NAMES: tuple[str, ...] = tuple(sorted(_SETTINGS))


class Settings(Mapping):
    """Read-only settings of one notebook in one profile, readable as ``settings.epochs``.

    A group of settings is read the same way and is read-only too: ``settings.model`` holds a
    notebook's architecture, the keyword arguments of its model builder, so that a notebook
    writes ``build_language_model(vocabulary_size, settings.chunk_length, **settings.model)``
    (nanoGPT's ``GPTConfig``, as a profile entry) and reads ``settings.model.embed_dim``.

    Raises:
        AttributeError / KeyError: for a setting the profile does not define; the message lists
            the settings that exist.
    """

    def __init__(self, notebook: str, profile_name: str, values: Mapping[str, Any], group: str = ""):
        self._notebook = notebook
        self._profile_name = profile_name
        self._group = group
        self._values = MappingProxyType(dict(values))

    def __getitem__(self, key: str) -> Any:
        try:
            value = self._values[key]
        except KeyError:
            raise KeyError(
                f"Notebook {self._notebook!r} has no setting {self._group + key!r} in profile "
                f"{self._profile_name!r}; it has: {', '.join(self._group + name for name in sorted(self._values))}."
            ) from None
        if isinstance(value, Mapping):  # a group, such as the architecture: read-only too
            return Settings(self._notebook, self._profile_name, value, group=f"{self._group}{key}.")
        return value

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):
            raise AttributeError(key)
        try:
            return self[key]
        except KeyError as error:
            raise AttributeError(error.args[0]) from None

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        items = ", ".join(f"{key}={value!r}" for key, value in self._values.items())
        return f"Settings(notebook={self._notebook!r}, profile={self._profile_name!r}, {items})"


@dataclass(frozen=True)
class Profile:
    """A named profile; ``notebook(id)`` gives that notebook's settings."""

    name: str

    def notebook(self, notebook_id: str) -> Settings:
        """Settings for notebook ``notebook_id`` (``"01"``, ``"02"``, ...).

        Raises:
            ValueError: if the profile defines no settings for ``notebook_id``.
        """
        table = _SETTINGS[self.name]
        if notebook_id not in table:
            raise ValueError(f"`notebook_id` must be one of {sorted(table)}; received {notebook_id!r}.")
        return Settings(notebook_id, self.name, table[notebook_id])

    @property
    def is_full(self) -> bool:
        """True for the profile whose results the course reports."""
        return self.name == "full"

    @property
    def eager_functions(self) -> bool:
        """True where TensorFlow's functions run eagerly (``tf.config.run_functions_eagerly``): the smoke
        profile, whose models are too small and run too few steps to repay tracing a graph.
        :func:`~transformer_course.tooling.runtime.start_notebook` applies it on the TensorFlow backend."""
        return self.name == "smoke"


def profile(name: str | None = None) -> Profile:
    """Return the active run profile.

    Args:
        name: ``"smoke"`` or ``"full"``. Defaults to the ``COURSE_PROFILE`` environment
            variable, and to ``"full"`` when that is unset or empty.

    Returns:
        A :class:`Profile`; ``profile().notebook("01").epochs`` is a setting.

    Raises:
        ValueError: for an unknown profile name; the message lists the valid ones and says
            where the bad name came from.
    """
    source = "`name`"
    if name is None:
        name = os.environ.get("COURSE_PROFILE", "").strip() or DEFAULT_PROFILE
        source = "COURSE_PROFILE"
    if name not in _SETTINGS:
        raise ValueError(f"Unknown profile {name!r} (from {source}); valid profiles: {', '.join(PROFILE_NAMES)}.")
    return Profile(name)


def checkpoint_path(name: str, folder: str | Path = "checkpoints", profile_name: str | None = None) -> Path:
    """Where a notebook keeps the checkpoint called ``name``: one folder per profile.

    A smoke run (CI, nbval) and a full run of the same notebook write different files, so a quick
    check never overwrites the checkpoint a full run reloads.

    Args:
        name: str, a file-name stem such as ``"english_to_spanish"``.
        folder: the checkpoints folder (default ``checkpoints``, beside the notebook).
        profile_name: ``"smoke"`` or ``"full"``; default: the active profile (``COURSE_PROFILE``).

    Returns:
        ``Path(folder) / profile_name / f"{name}.keras"`` (the folder is created).

    Raises:
        ValueError: for an empty ``name`` or one with a path separator.
    """
    if not name or "/" in name or "\\" in name:
        raise ValueError(f"`name` must be a plain file-name stem; received {name!r}.")
    directory = Path(folder) / (profile_name or profile().name)
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{name}.keras"
