"""Every private Keras name keras_bnn uses (``keras.src``), and why no public API serves.

No other module of keras_bnn names ``keras.src``: they import these names
from here (``tests/test_internals41.py`` checks both, and that each name
exists in the installed Keras). These names are why keras_bnn asks for
``keras>=3.15,<4``; a Keras upgrade that moves one breaks this module
alone, at ``import``.

Public APIs looked at first: ``keras.ops``, ``keras.tree``, ``keras.saving``,
``keras.distribution``, ``keras.utils``, ``keras.backend``, ``keras.config``
(Keras 3.15). Each name below says what it does for keras_bnn and why none
of them serves:

``Functional``
    The class of ``keras.Model(inputs, outputs)`` models, the models Keras
    rebuilds from a graph config. Keras exports no ``keras.Functional``;
    ``isinstance(model, Functional)`` tells a graph model from a subclassed one.
``ArrayDataAdapter``, ``can_convert_arrays``
    The adapter ``fit`` builds for arrays, and the test of which inputs it
    takes. keras_bnn subclasses it (``keras_bnn.array_order.KeyedArrays``) to
    draw the batch order from (seed, step); ``fit`` has no public hook for it.
``convert_to_sliceable``, ``train_validation_split``
    How ``fit`` converts arrays and splits off ``validation_split``.
    ``keras.utils.split_dataset`` returns datasets, shuffled or not, not the
    arrays ``fit`` itself would keep, which ``KeyedArrays`` must reproduce.
``is_tensorflow_sparse``, ``is_tensorflow_ragged``, ``is_jax_sparse``, ``is_scipy_sparse``
    The sparse and ragged inputs Keras' adapter takes but cannot gather, by
    their type's module: no import of TensorFlow, JAX or SciPy. No public test.
``get_keras_mask``, ``set_keras_mask``
    The mask a tensor carries (``_keras_mask``) as Keras' losses read it.
    Keras exports no accessor; a JAX array takes no attribute, so the
    attribute itself does not serve either.
``get_tensor_attr``, ``set_tensor_attr``
    Keras' store of an attribute on a tensor (an attribute, or by ``id`` for
    a JAX array), on which keras_bnn carries an ensemble's members and
    log-probabilities from ``call`` to the loss. Not exported.
``in_symbolic_scope``
    Whether Keras runs its symbolic shape pass (``keras.SymbolicScope``, public,
    enters it; no public function says whether one is entered). Under
    TensorFlow the tensors of that pass are graph tensors, not KerasTensors,
    so ``keras.backend.is_keras_tensor`` cannot tell.
``squeeze_or_expand_to_same_rank``
    How Keras' loss reduction aligns a mask's or weight's rank with the
    loss's; keras_bnn counts the same terms. Not exported.
``unscale_loss_for_distribution``
    Undoes Keras' 1/replicas loss scaling under ``tf.distribute``. Not
    exported; ``keras.distribution`` (JAX) has no loss scaling.
``in_safe_mode``
    ``None`` outside Keras' deserialization (its ``SafeModeScope``), True or
    False inside: whether a config is being loaded now. ``keras.config``
    sets the unsafe mode but has no function that reads it.
``legacy_h5_saving``
    Whether Keras' legacy HDF5 saving (``save_model(model, "x.h5")``) asks for
    a config now: it sets the global ``use_legacy_config``, which ``Functional``
    and ``Sequential`` read by ``global_state``; nothing public reads it.
"""

from keras.src.backend.common import global_state
from keras.src.backend.common.masking import get_keras_mask, set_keras_mask
from keras.src.backend.common.symbolic_scope import in_symbolic_scope
from keras.src.backend.common.tensor_attributes import get_tensor_attr, set_tensor_attr
from keras.src.losses.loss import squeeze_or_expand_to_same_rank, unscale_loss_for_distribution
from keras.src.models.functional import Functional
from keras.src.saving.serialization_lib import in_safe_mode
from keras.src.trainers.data_adapters.array_data_adapter import (ArrayDataAdapter,
                                                                 can_convert_arrays)
from keras.src.trainers.data_adapters.array_slicing import (convert_to_sliceable,
                                                            train_validation_split)
from keras.src.trainers.data_adapters.data_adapter_utils import (is_jax_sparse,
                                                                 is_scipy_sparse,
                                                                 is_tensorflow_ragged,
                                                                 is_tensorflow_sparse)

__all__ = ["ArrayDataAdapter", "Functional", "can_convert_arrays", "convert_to_sliceable",
           "get_keras_mask", "get_tensor_attr", "in_safe_mode", "in_symbolic_scope",
           "is_jax_sparse", "is_scipy_sparse", "is_tensorflow_ragged", "is_tensorflow_sparse",
           "legacy_h5_saving", "set_keras_mask", "set_tensor_attr",
           "squeeze_or_expand_to_same_rank", "train_validation_split",
           "unscale_loss_for_distribution"]


def legacy_h5_saving():
    """Whether Keras' legacy HDF5 saving is asking for a config now.

    Returns:
        bool: True inside ``keras.saving.save_model(model, "x.h5")`` (Keras'
        ``keras_option_scope(use_legacy_config=True)``), else False.
    """
    return bool(global_state.get_global_attribute("use_legacy_config", False))
