"""The mixin that gives a Keras layer ``<weight>_prior`` arguments.

A prior-aware layer takes one ``*_prior`` argument per weight. Each prior is a
:class:`keras_bnn.priors.Prior`, i.e. a Keras regularizer whose value is
``-log p(w)``, so attaching it to the weight as its
regularizer puts the prior term into ``layer.losses`` (and so into the
mean-form potential the samplers use).
"""

from keras_bnn import priors as priors_lib

_UNSET = object()


class PriorAwareMixin:
    """Turns ``*_prior`` constructor arguments into weight regularizers.

    Mix it in *before* the Keras layer class
    (``class Dense(PriorAwareMixin, keras.layers.Dense)``). Subclasses declare
    ``prior_arguments``, a dict mapping each prior argument name to
    ``(regularizer_argument, default)``:

    * ``regularizer_argument`` is the Keras constructor argument that receives
      the prior (``"kernel_regularizer"``), or ``None`` for layers that create
      their weights themselves with :meth:`_add_prior_weight`;
    * ``default`` is a zero-argument callable giving the default prior.

    The argument of a weight named ``w`` is ``w_prior`` (``kernel`` →
    ``kernel_prior``, an LSTM cell's ``recurrent_kernel`` →
    ``recurrent_kernel_prior``, a weight-normalised layer's ``scale`` →
    ``scale_prior``): :meth:`prior_argument_of`.

    Each prior argument accepts a :class:`~keras_bnn.priors.Prior`, a prior
    name, a serialized prior, or ``None`` (no prior: a flat, improper prior
    that sampling leaves unregularised and :func:`keras_bnn.prior_predictive`
    leaves unchanged). Priors are never modified by a model, so one instance
    can be shared by many layers.

    After ``build`` every prior is checked against the shape of the weight it
    sits on, so a prior of the wrong rank raises at build time with the
    argument named in the message.

    Raises:
        ValueError: for an unknown prior, for a Keras ``*_regularizer``
            argument that would silently replace a prior, or (at build) for a
            prior that does not fit its weight's shape.
    """

    prior_arguments = {}

    def __init__(self, *args, **kwargs):
        resolved = {}
        for argument, (regularizer_argument, default) in self.prior_arguments.items():
            if regularizer_argument is not None:
                if kwargs.pop(regularizer_argument, None) is not None:
                    raise ValueError(
                        f"{type(self).__name__}: pass the prior as "
                        f"`{argument}`, not `{regularizer_argument}`; the prior "
                        "is the regularizer of that weight."
                    )
            value = kwargs.pop(argument, _UNSET)
            prior = default() if value is _UNSET else priors_lib.get(value, argument)
            resolved[argument] = prior
            if regularizer_argument is not None:
                kwargs[regularizer_argument] = resolved[argument]
        super().__init__(*args, **kwargs)
        for argument, prior in resolved.items():
            setattr(self, argument, prior)

    def build(self, input_shape=None):
        """Builds the wrapped Keras layer, then checks every prior's shape.

        Args:
            input_shape: passed on to the Keras layer's ``build``.

        Raises:
            ValueError: naming the prior argument whose prior does not fit
                its weight.
        """
        super().build(input_shape)
        for variable in self.weights:
            argument = self.prior_argument_of(variable.name)
            prior = argument and getattr(self, argument)
            if prior is not None and variable.regularizer is prior:
                prior.validate_shape(variable.shape, argument)

    def prior_argument_of(self, name):
        """The prior argument of this layer's weight ``name`` (``"kernel"`` →
        ``"kernel_prior"``), or None if the layer has none for it.

        Args:
            name: a weight's name (``variable.name``), the layer's own or
                that of the Keras cell it wraps.

        Returns:
            str or None.
        """
        argument = f"{name}_prior"
        return argument if argument in self.prior_arguments else None

    def _add_prior_weight(self, argument, name, shape, initializer):
        """Creates a trainable weight whose regularizer is a prior argument.

        For layers that create their own weights: the prior is checked against
        ``shape`` before the weight exists.

        Args:
            argument: the prior argument (``"scale_prior"``).
            name: the weight's name.
            shape: the weight's shape.
            initializer: a Keras initializer or its name.

        Returns:
            The new variable.

        Raises:
            ValueError: naming ``argument`` when the prior does not fit
                ``shape``.
        """
        prior = getattr(self, argument)
        if prior is not None:
            prior.validate_shape(shape, argument)
        return self.add_weight(
            name=name, shape=shape, initializer=initializer, regularizer=prior
        )

    def get_config(self):
        config = super().get_config()
        for argument, (regularizer_argument, _) in self.prior_arguments.items():
            if regularizer_argument is not None:
                config.pop(regularizer_argument, None)
            config[argument] = priors_lib.serialize(getattr(self, argument))
        return config
