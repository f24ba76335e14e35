"""The token id every vocabulary of the course keeps for padding, without Keras.

``masks`` exports it beside :func:`~transformer_course.masks.padding_mask`, the one function that
tells padding from real tokens on tensors; NumPy-only modules (decoding, n-gram baselines) read it
here, so that they do not load Keras.
"""

# Keras' `TextVectorization` and `Embedding(mask_zero=True)` keep 0 for padding too.
PADDING_ID = 0
