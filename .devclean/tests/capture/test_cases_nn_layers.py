"""Differential cases: the torch.nn layers model code is built from, each compiled on its own
(train mode with gradients unless noted), compared with eager including parameter grads and
buffers (running stats)."""

from __future__ import annotations

import pytest
import torch
from _differential import check_module, t
from torch import nn


def _eval(m: nn.Module) -> nn.Module:
    return m.eval()


LAYERS = [
    ("conv1d", lambda: nn.Conv1d(3, 4, 3, padding=1), (t(2, 3, 8),)),
    ("conv2d_stride_dilation", lambda: nn.Conv2d(3, 4, 3, stride=2, dilation=2), (t(1, 3, 9, 9),)),
    ("conv_transpose2d", lambda: nn.ConvTranspose2d(3, 2, 3, stride=2), (t(1, 3, 4, 4),)),
    ("conv3d", lambda: nn.Conv3d(2, 2, 2), (t(1, 2, 3, 3, 3),)),
    ("batchnorm1d_train", lambda: nn.BatchNorm1d(4), (t(6, 4),)),
    ("batchnorm2d_eval", lambda: _eval(nn.BatchNorm2d(3)), (t(2, 3, 4, 4),)),
    ("groupnorm", lambda: nn.GroupNorm(2, 4), (t(2, 4, 3, 3),)),
    ("instancenorm2d", lambda: nn.InstanceNorm2d(3, affine=True), (t(2, 3, 4, 4),)),
    ("layernorm_no_bias", lambda: nn.LayerNorm(6, bias=False), (t(2, 6),)),
    ("rmsnorm", lambda: nn.RMSNorm(6), (t(2, 6),)),
    ("embedding_padding_idx", lambda: nn.Embedding(10, 4, padding_idx=0),
     (torch.tensor([[0, 3, 9]]),)),
    ("embedding_bag", lambda: nn.EmbeddingBag(10, 4, mode="mean"), (torch.tensor([[1, 2], [3, 4]]),)),
    ("bilinear", lambda: nn.Bilinear(3, 4, 2), (t(2, 3), t(2, 4))),
    ("prelu", lambda: nn.PReLU(3), (t(2, 3),)),
    ("activations_stack", lambda: nn.Sequential(nn.ELU(), nn.SELU(), nn.Mish(), nn.Hardtanh(),
                                                nn.Softsign(), nn.Tanhshrink()), (t(2, 5),)),
    ("softmax_logsoftmax", lambda: nn.Sequential(nn.Softmax(dim=-1), nn.LogSoftmax(dim=0)),
     (t(3, 4),)),
    ("maxpool_avgpool_1d", lambda: nn.Sequential(nn.MaxPool1d(2), nn.AvgPool1d(2)), (t(1, 2, 8),)),
    ("adaptive_max_pool2d", lambda: nn.AdaptiveMaxPool2d((2, 2)), (t(1, 2, 5, 5),)),
    ("upsample_bilinear", lambda: nn.Upsample(scale_factor=2, mode="bilinear"), (t(1, 1, 3, 3),)),
    ("pixel_shuffle", lambda: nn.PixelShuffle(2), (t(1, 8, 2, 2),)),
    ("unflatten_flatten", lambda: nn.Sequential(nn.Unflatten(1, (2, 3)), nn.Flatten(0, 1)),
     (t(2, 6),)),
    ("dropout_eval", lambda: _eval(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))), (t(2, 4),)),
    ("dropout2d_train_seeded", lambda: nn.Dropout2d(0.5), (t(2, 4, 3, 3),)),
    ("zero_pad_reflection_pad", lambda: nn.Sequential(nn.ZeroPad2d(1), nn.ReflectionPad2d(1)),
     (t(1, 1, 3, 3),)),
    ("cosine_similarity_pairwise", lambda: nn.CosineSimilarity(dim=1), (t(3, 4), t(3, 4, seed=1))),
    ("identity_linear_no_bias", lambda: nn.Sequential(nn.Identity(), nn.Linear(4, 3, bias=False)),
     (t(2, 4),)),
    ("multihead_attention_train", lambda: nn.MultiheadAttention(8, 2, batch_first=True),
     (t(2, 3, 8), t(2, 3, 8, seed=1), t(2, 3, 8, seed=2))),
    ("transformer_encoder_layer_eval",
     lambda: _eval(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)),
     (t(2, 3, 8),)),
    ("transformer_encoder_layer_train",
     lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True),
     (t(2, 3, 8),)),
    ("lstm", lambda: nn.LSTM(4, 5, batch_first=True), (t(2, 3, 4),)),
    ("gru_two_layers", lambda: nn.GRU(4, 3, num_layers=2), (t(3, 2, 4),)),
    ("loss_modules", lambda: nn.ModuleList([nn.MSELoss(), nn.SmoothL1Loss(), nn.BCEWithLogitsLoss()]),
     None),
]


class _Losses(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.losses = nn.ModuleList([nn.MSELoss(), nn.SmoothL1Loss(), nn.BCEWithLogitsLoss()])

    def forward(self, x, y):
        p = self.fc(x).squeeze(-1)
        return sum(loss(p, y) for loss in self.losses)


@pytest.mark.parametrize(("name", "make", "args"), LAYERS, ids=[c[0] for c in LAYERS])
def test_nn_layer(name, make, args):
    torch.manual_seed(0)
    if args is None:
        check_module(_Losses(), t(3, 4), torch.tensor([0.0, 1.0, 1.0]), grad=True)
        return
    module = make()
    has_params = any(True for _ in module.parameters())
    check_module(module, *args, grad=has_params and module.training)
