"""The layers of ``agrad.nn``, one module per family as in ``torch.nn.modules``."""

from agrad.nn.modules import utils  # noqa: F401  (agrad.nn.modules.utils, as torch.nn.modules.utils)
from agrad.nn.modules.activation import *  # noqa: F403
from agrad.nn.modules.batchnorm import *  # noqa: F403
from agrad.nn.modules.channelshuffle import *  # noqa: F403
from agrad.nn.modules.container import *  # noqa: F403
from agrad.nn.modules.conv import *  # noqa: F403
from agrad.nn.modules.distance import *  # noqa: F403
from agrad.nn.modules.dropout import *  # noqa: F403
from agrad.nn.modules.flatten import *  # noqa: F403
from agrad.nn.modules.fold import *  # noqa: F403
from agrad.nn.modules.instancenorm import *  # noqa: F403
from agrad.nn.modules.linear import *  # noqa: F403
from agrad.nn.modules.loss import *  # noqa: F403
from agrad.nn.modules.module import Module
from agrad.nn.modules.normalization import *  # noqa: F403
from agrad.nn.modules.padding import *  # noqa: F403
from agrad.nn.modules.pixelshuffle import *  # noqa: F403
from agrad.nn.modules.pooling import *  # noqa: F403
from agrad.nn.modules.rnn import *  # noqa: F403
from agrad.nn.modules.sparse import *  # noqa: F403
from agrad.nn.modules.transformer import *  # noqa: F403
from agrad.nn.modules.upsampling import *  # noqa: F403

# One literal list (type checkers read it; tests/nn/test_module.py checks it is
# every family's ``__all__``), by family.
__all__ = [
    "Module",
    # activation
    "Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh", "SiLU", "Mish",
    "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU", "LogSigmoid", "Softplus",
    "Softshrink", "PReLU", "Softsign", "Tanhshrink", "Softmin", "Softmax", "Softmax2d", "LogSoftmax",
    # batchnorm
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
    # channelshuffle
    "ChannelShuffle",
    # container
    "Container", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
    # conv
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    # distance
    "PairwiseDistance", "CosineSimilarity",
    # dropout
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
    # flatten
    "Flatten", "Unflatten",
    # fold
    "Fold", "Unfold",
    # instancenorm
    "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    # linear
    "Identity", "Linear", "Bilinear",
    # loss
    "L1Loss", "NLLLoss", "NLLLoss2d", "PoissonNLLLoss", "GaussianNLLLoss", "KLDivLoss", "MSELoss", "BCELoss",
    "BCEWithLogitsLoss", "HingeEmbeddingLoss", "MultiLabelMarginLoss", "SmoothL1Loss", "HuberLoss",
    "SoftMarginLoss", "CrossEntropyLoss", "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss", "MarginRankingLoss",
    "MultiMarginLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss",
    # normalization
    "LocalResponseNorm", "LayerNorm", "GroupNorm", "RMSNorm",
    # padding
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
    "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
    # pixelshuffle
    "PixelShuffle", "PixelUnshuffle",
    # pooling
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "AvgPool1d", "AvgPool2d",
    "AvgPool3d", "LPPool1d", "LPPool2d", "LPPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    # rnn
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
    # sparse
    "Embedding", "EmbeddingBag",
    # transformer
    "MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    # upsampling
    "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
]
