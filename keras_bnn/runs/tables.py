"""The tables of a run's configuration: the names a run accepts, and the defaults.

Plain tables, without Keras or TensorFlow, so that :class:`keras_bnn.runs.RunConfig`
(:mod:`keras_bnn.runs.config`, which re-exports them) checks a configuration
before the ``keras-bnn`` command imports them: the names each field accepts
(:data:`DATASETS`, :data:`MODELS`, :data:`SAMPLERS`, :data:`PRIORS`,
:data:`LIKELIHOODS`, and the keys of ``sampler_args`` and ``model_args``),
which the tests check against :data:`keras_bnn.data.DATASETS`,
:data:`keras_bnn.samplers.REGISTRY`, :data:`keras_bnn.runs.KERNEL_PRIORS`,
:data:`keras_bnn.likelihoods.LIKELIHOODS` and the builders' signatures; and
what a field left unset gets (README, "Right by default").
"""

from keras_bnn.datasets.bundled import BUNDLED

#: ``RunConfig.dataset`` of a run on in-memory arrays (see :func:`keras_bnn.runs.sweep`).
ARRAYS = "arrays"
#: The dataset names of :func:`keras_bnn.data.load` (``keras_bnn.data.DATASETS``).
DATASETS = ("synthetic", *BUNDLED, "npy", "fashion_mnist", "mnist", "cifar10", "imdb")
#: The datasets that read ``RunConfig.data_dir`` (the others are generated or
#: bundled with the package, and would ignore it).
DATA_DIR_DATASETS = tuple(name for name in DATASETS if name != "synthetic" and
                          name not in BUNDLED)
MODELS = ("mlp", "resnet_pp", "resnet20_frn", "cnn_lstm", "cnn")
#: The datasets of images (``(height, width, channels)`` examples).
IMAGE_DATASETS = ("fashion_mnist", "mnist", "cifar10")
#: Models that need datasets of their own, and why: ``{model: (datasets, reason)}``.
#: The convolutional ones take images (or arrays the caller shapes as images);
#: cnn_lstm reads token ids. The MLP takes any dataset (it flattens).
MODEL_DATASETS = {
    "cnn_lstm": (("imdb",), "it reads token ids"),
    **{model: ((*IMAGE_DATASETS, "npy", ARRAYS), "it convolves images")
       for model in ("resnet_pp", "resnet20_frn", "cnn")},
}
#: The names of :data:`keras_bnn.samplers.REGISTRY`, each with whether it
#: collects samples (False: the SGD/MAP baseline, which stores its final point).
SAMPLERS = {"sgld": True, "sghmc": True, "sgnht": True, "atmc": True, "hmc": True,
            "sgd": False}
#: The keys ``sampler_args`` may hold, per :data:`SAMPLERS` name: the
#: constructor's parameters but those the run sets itself (step size or
#: learning rate, noise seed, temperature, training-set size). A table, not
#: the signatures, so that a bad key is refused before Keras is imported;
#: ``tests/test_cli_quick.py`` keeps it equal to the signatures.
_SAMPLER_ARGS = ("name", "noise_estimate_decay", "target_noise_ratio", "warmup_steps")
_THERMOSTAT_ARGS = (*_SAMPLER_ARGS, "mass", "momentum", "noise", "speed_limit", "thermostat_mass")
SAMPLER_ARGS = {
    "sgld": (*_SAMPLER_ARGS, "epsilon", "preconditioner", "rho"),
    "sghmc": (*_SAMPLER_ARGS, "epsilon", "friction", "integrator", "mass", "preconditioner",
              "rho"),
    "sgnht": _THERMOSTAT_ARGS,
    "atmc": _THERMOSTAT_ARGS,
    "hmc": (*_SAMPLER_ARGS, "num_adaptation_steps", "num_leapfrog_steps", "target_accept_rate"),
    "sgd": ("clipnorm", "clipvalue", "ema_momentum", "ema_overwrite_frequency",
            "global_clipnorm", "gradient_accumulation_steps", "loss_scale_factor", "momentum",
            "name", "nesterov", "use_ema", "weight_decay"),
}
#: The keys ``model_args`` may hold, per :data:`MODELS` name: the builder's
#: parameters but the shapes the run fills in (as :data:`SAMPLER_ARGS`, kept
#: equal to the signatures by a test).
MODEL_ARGS = {
    "mlp": ("activation", "bias_prior", "hidden", "kernel_prior", "name"),
    "resnet_pp": ("bias_prior", "depth", "direction_prior", "name", "residual_scale_init",
                  "scale_prior", "width"),
    "resnet20_frn": ("bias_prior", "depth", "kernel_prior", "name", "width"),
    "cnn_lstm": ("bias_prior", "embedding_dim", "embeddings_prior", "filters", "kernel_prior",
                 "kernel_size", "lstm_units", "name", "pool_size", "sequence_length"),
    "cnn": ("activation", "bias_prior", "dense", "filters", "kernel_prior", "kernel_size",
            "name"),
}
#: Kernel priors of :attr:`keras_bnn.runs.RunConfig.prior` (built by
#: :data:`keras_bnn.runs.KERNEL_PRIORS`).
PRIORS = ("he_normal", "glorot_normal", "student_t", "he_student_t")
#: :data:`keras_bnn.likelihoods.LIKELIHOODS`.
LIKELIHOODS = ("categorical", "bernoulli", "gaussian")
#: What :func:`keras_bnn.runs.sweep` can vary.
SWEEP_PARAMS = ("temperature", "prior_scale")
#: Degrees of freedom of the "student_t" kernel prior (heavy tails; Fortuin
#: et al. 2022 found such priors fit fully connected networks better).
STUDENT_T_DF = 3.0
#: The likelihood each bundled dataset's task implies (others: categorical).
TASK_LIKELIHOOD = {"classification": "categorical", "binary": "bernoulli",
                   "regression": "gaussian"}
#: Defaults of the :class:`~keras_bnn.runs.RunConfig` fields that are left at None: one set
#: for every dataset (README, "Right by default"). The step size is the
#: sampler's warm-up (``"auto"``), collection starts at equilibrium
#: (``burn_in_epochs="auto"``), the length is counted in steps, so that a
#: tiny dataset (2 steps an epoch) and a large one (469) both get the
#: warm-up's 1000 steps and enough sampling after it, and the prior is
#: chosen on a validation split (``prior="auto"``, :data:`PRIOR_CANDIDATES`).
DEFAULTS = {"prior": "auto", "prior_scale": None}
#: The kernel priors ``prior="auto"`` chooses from (:mod:`keras_bnn.runs.selection`):
#: the builders' He-normal(1), and the heavy-tailed Student-t(3, 0.4) that
#: Fortuin et al. 2022 found to fit fully connected networks better. No one
#: of them is right for every dataset (measured: README, "Right by default").
PRIOR_CANDIDATES = (("he_normal", 1.0), ("student_t", 0.4))
#: The prior of ``prior="auto"`` where nothing is selected (a dataset not
#: held in memory, or data passed in): the builders' default.
FALLBACK_PRIOR = PRIOR_CANDIDATES[0]
#: Share of the training set ``prior="auto"`` holds out to score the candidates.
PRIOR_VALIDATION_SPLIT = 0.2
#: Model arguments of a run that gives none (``kb.models.mlp``'s own default
#: is the cold-posterior paper's 3×128): two layers of 100 units, measured
#: better calibrated on the bundled tables (README, "Right by default").
DEFAULT_MODEL_ARGS = {"mlp": {"hidden": [100, 100]}}
#: Training steps of a run whose ``epochs`` is None
#: (see :func:`keras_bnn.runs.config.default_epochs`).
DEFAULT_STEPS = 4000
#: Fewest epochs of such a run: the equilibrium test needs 2 windows of 10
#: epochs after the warm-up.
MIN_EPOCHS = 30
#: A run whose ``collect_every`` is None keeps about this many samples.
SAMPLES_PER_RUN = 100
#: Least share of its ``epochs`` that a run which collects from equilibrium
#: and may go on (``max_epochs``) spends sampling: a quarter, so that a run
#: of default length keeps at least 25 of the ~:data:`SAMPLES_PER_RUN`
#: samples it aims at (what a chain stationary at three quarters of the run
#: collects). A chain that is stationary later (each chain of ``--chains K``
#: finds its own equilibrium) trains on until it has sampled that long, up
#: to :data:`MAX_LENGTH` times the default length, so that no chain's
#: ensemble, and no R-hat across chains (over the shortest chain's draws),
#: rests on a handful of samples.
MIN_SAMPLED_SHARE = 0.25
#: The longest run of default length, in units of :func:`keras_bnn.runs.config.default_epochs`.
MAX_LENGTH = 2
