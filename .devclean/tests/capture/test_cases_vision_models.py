"""Differential cases: miniature versions of the timm models the issue names, written the way
timm writes them (timm itself needs torchvision, absent from the default env): a ResNet basic
block with in-place ReLU and a downsample shortcut, a MobileNetV3 block with squeeze-excite
and hard-swish, a ViT with patch embedding, class token, position embedding, fused attention
and LayerScale. Train mode (gradients, running stats) and eval mode."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _differential import check_module, t
from torch import nn


def make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.act1 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.act2 = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        shortcut = x
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.act1(x)
        x = self.conv2(x)
        x = self.bn2(x)
        if self.downsample is not None:
            shortcut = self.downsample(shortcut)
        x += shortcut
        x = self.act2(x)
        return x


class MiniResNet(nn.Module):
    def __init__(self, num_classes: int = 5) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.act1 = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(BasicBlock(8, 8), BasicBlock(8, 8))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, stride=2))
        self.global_pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, num_classes)

    def forward_features(self, x):
        x = self.maxpool(self.act1(self.bn1(self.conv1(x))))
        return self.layer2(self.layer1(x))

    def forward_head(self, x, pre_logits: bool = False):
        x = self.global_pool(x).flatten(1)
        return x if pre_logits else self.fc(x)

    def forward(self, x):
        return self.forward_head(self.forward_features(x))


class SqueezeExcite(nn.Module):
    def __init__(self, chs: int, rd_ratio: float = 0.25) -> None:
        super().__init__()
        rd = make_divisible(chs * rd_ratio, 4)
        self.conv_reduce = nn.Conv2d(chs, rd, 1)
        self.act1 = nn.ReLU(inplace=True)
        self.conv_expand = nn.Conv2d(rd, chs, 1)
        self.gate = nn.Hardsigmoid()

    def forward(self, x):
        x_se = x.mean((2, 3), keepdim=True)
        x_se = self.act1(self.conv_reduce(x_se))
        return x * self.gate(self.conv_expand(x_se))


class InvertedResidual(nn.Module):
    def __init__(self, in_chs: int, mid_chs: int, out_chs: int, stride: int = 1) -> None:
        super().__init__()
        self.has_skip = stride == 1 and in_chs == out_chs
        self.conv_pw = nn.Conv2d(in_chs, mid_chs, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid_chs)
        self.act1 = nn.Hardswish(inplace=True)
        self.conv_dw = nn.Conv2d(mid_chs, mid_chs, 3, stride, 1, groups=mid_chs, bias=False)
        self.bn2 = nn.BatchNorm2d(mid_chs)
        self.act2 = nn.Hardswish(inplace=True)
        self.se = SqueezeExcite(mid_chs)
        self.conv_pwl = nn.Conv2d(mid_chs, out_chs, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_chs)
        self.drop_path = nn.Identity()

    def forward(self, x):
        shortcut = x
        x = self.act1(self.bn1(self.conv_pw(x)))
        x = self.act2(self.bn2(self.conv_dw(x)))
        x = self.se(x)
        x = self.bn3(self.conv_pwl(x))
        if self.has_skip:
            x = self.drop_path(x) + shortcut
        return x


class MiniMobileNetV3(nn.Module):
    def __init__(self, num_classes: int = 5) -> None:
        super().__init__()
        self.conv_stem = nn.Conv2d(3, 8, 3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.act1 = nn.Hardswish(inplace=True)
        self.blocks = nn.Sequential(InvertedResidual(8, 16, 8), InvertedResidual(8, 24, 16, 2))
        self.global_pool = nn.AdaptiveAvgPool2d(1)
        self.conv_head = nn.Conv2d(16, 32, 1)
        self.act2 = nn.Hardswish(inplace=True)
        self.flatten = nn.Flatten(1)
        self.classifier = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.blocks(self.act1(self.bn1(self.conv_stem(x))))
        x = self.act2(self.conv_head(self.global_pool(x)))
        return self.classifier(self.flatten(x))


class PatchEmbed(nn.Module):
    def __init__(self, img: int = 16, patch: int = 4, dim: int = 16) -> None:
        super().__init__()
        self.num_patches = (img // patch) ** 2
        self.proj = nn.Conv2d(3, dim, patch, patch)
        self.norm = nn.Identity()

    def forward(self, x):
        x = self.proj(x).flatten(2).transpose(1, 2)
        return self.norm(x)


class ViTAttention(nn.Module):
    fused_attn = True

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.q_norm = nn.Identity()
        self.k_norm = nn.Identity()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)
        if self.fused_attn:
            x = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
        else:
            attn = (q * self.scale) @ k.transpose(-2, -1)
            x = attn.softmax(dim=-1) @ v
        return self.proj(x.transpose(1, 2).reshape(b, n, c))


class LayerScale(nn.Module):
    def __init__(self, dim: int, init_values: float = 1e-1) -> None:
        super().__init__()
        self.gamma = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x):
        return x * self.gamma


class ViTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, fused: bool) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = ViTAttention(dim, heads)
        self.attn.fused_attn = fused
        self.ls1 = LayerScale(dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Dropout(0.0),
                                 nn.Linear(2 * dim, dim))
        self.ls2 = LayerScale(dim)

    def forward(self, x):
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


class MiniViT(nn.Module):
    def __init__(self, fused: bool = True, num_classes: int = 5, dim: int = 16) -> None:
        super().__init__()
        self.patch_embed = PatchEmbed(dim=dim)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, self.patch_embed.num_patches + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[ViTBlock(dim, 2, fused) for _ in range(2)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)
        self.global_pool = "token"

    def _pos_embed(self, x):
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        return x + self.pos_embed

    def forward(self, x):
        x = self._pos_embed(self.patch_embed(x))
        x = self.norm(self.blocks(x))
        x = x[:, 0] if self.global_pool == "token" else x.mean(dim=1)
        return self.head(x)


def _eval(m: nn.Module) -> nn.Module:
    return m.eval()


MODELS = [
    pytest.param(lambda: MiniResNet(), (t(2, 3, 16, 16),), True, id="resnet_train"),
    pytest.param(lambda: _eval(MiniResNet()), (t(2, 3, 16, 16),), False, id="resnet_eval"),
    pytest.param(lambda: MiniMobileNetV3(), (t(2, 3, 16, 16),), True, id="mobilenetv3_train"),
    pytest.param(lambda: _eval(MiniMobileNetV3()), (t(2, 3, 16, 16),), False,
                 id="mobilenetv3_eval"),
    pytest.param(lambda: MiniViT(), (t(2, 3, 16, 16),), True, id="vit_fused_train"),
    pytest.param(lambda: _eval(MiniViT(fused=False)), (t(2, 3, 16, 16),), False,
                 id="vit_unfused_eval"),
    pytest.param(lambda: BasicBlock(4, 8, stride=2), (t(2, 4, 8, 8, requires_grad=True),), True,
                 id="basic_block_downsample_input_grad"),
    pytest.param(lambda: SqueezeExcite(8), (t(2, 8, 4, 4),), True, id="squeeze_excite"),
]


@pytest.mark.parametrize(("make", "args", "grad"), MODELS)
def test_vision_model(make, args, grad):
    torch.manual_seed(0)
    check_module(make(), *args, grad=grad)


def test_batchnorm_cumulative_average_counts_batches():
    # NOTE: momentum=None reads float(num_batches_tracked): data-dependent, so this frame may
    # run eagerly; either way the buffers must end up as eager leaves them.
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(3, momentum=None)
    _, compiled = check_module(bn, t(2, 3, 4, 4), calls=3, fullgraph=False, graphs=None)
    assert int(compiled.num_batches_tracked) == 3
