#!/usr/bin/env python3
"""Writes TensorFlow-made "pixel parity" fixtures into tests/fixtures/tf/.

Run it with a virtualenv of its own, outside the repository (it needs tensorflow-cpu, numpy
and pillow; none of these is a dependency of tfdata):

    python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu numpy pillow
    /tmp/tfenv/bin/python bench/tf_fixtures/make_fixtures.py            # from the repo root

Options: --out DIR (default tests/fixtures/tf next to this repo), --report (print the
INTEGER_FAST vs INTEGER_ACCURATE differences and the float64 cross-checks, nothing is stored).

The output is deterministic: same TF / numpy / Pillow versions give byte-identical files
(no timestamps, sorted proto maps, fixed inputs). tests/fixtures/tf/README.md describes the
manifest format.
"""

import argparse
import hashlib
import io
import os
import struct
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import PIL  # noqa: E402
from PIL import Image  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMMAND = "/tmp/tfenv/bin/python bench/tf_fixtures/make_fixtures.py"

DTYPE_NAMES = {
    np.dtype(np.uint8): "uint8",
    np.dtype(np.int64): "int64",
    np.dtype(np.float32): "float32",
}


def shape_str(shape):
    return "scalar" if len(shape) == 0 else ",".join(str(int(d)) for d in shape)


def f32_str(x):
    """Shortest decimal that parses back (as float32) to exactly this float32."""
    v = np.float32(x)
    s = str(v)
    assert np.float32(s) == v or (np.isnan(v) and np.isnan(np.float32(s))), (x, s)
    return s


class Writer:
    def __init__(self, out):
        self.out = out
        self.files = {}  # file name -> bytes
        self.tensor_lines = []
        self.jpeg_lines = []
        self.example_lines = []
        self.case_lines = []
        self.by_content = {}  # (dtype, shape, sha) -> file name

    def _put(self, name, data):
        assert name not in self.files, name
        assert " " not in name and "=" not in name, name
        self.files[name] = data

    def raw(self, kind, name, data, line_list, meta):
        """A file holding the exact bytes of one string scalar (a .jpg or a .pb)."""
        self._put(name, data)
        line_list.append(f"{kind} file={name} bytes={len(data)} {meta}".rstrip())
        return name

    def tensor(self, name, value, group):
        """Stores a numeric ndarray or a string tensor (np object array / list of bytes).
        A tensor identical to one stored before in the same group (op) reuses that file."""
        if isinstance(value, np.ndarray) and value.dtype != object:
            dtype = DTYPE_NAMES[value.dtype]
            shape = value.shape
            data = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes()
        else:
            arr = np.asarray(value, dtype=object)
            dtype = "string"
            shape = arr.shape
            data = b"".join(struct.pack("<I", len(s)) + bytes(s) for s in arr.reshape(-1))
        key = (group, dtype, tuple(shape), hashlib.sha256(data).hexdigest())
        if key in self.by_content:  # identical tensor already stored: reuse its file
            return self.by_content[key], dtype, shape
        fname = name + ".bin"
        self._put(fname, data)
        self.by_content[key] = fname
        self.tensor_lines.append(f"tensor file={fname} dtype={dtype} shape={shape_str(shape)}")
        return fname, dtype, shape

    def case(self, op, cid, tokens, expected=None):
        parts = ["case", f"op={op}", f"id={cid}"] + tokens
        if expected is not None:
            fname, dtype, shape = expected
            parts += [f"expected={fname}", f"dtype={dtype}", f"shape={shape_str(shape)}"]
        else:
            parts += ["expected=none"]
        line = " ".join(parts)
        assert "\n" not in line
        self.case_lines.append(line)

    def write(self, header):
        os.makedirs(self.out, exist_ok=True)
        for name, data in sorted(self.files.items()):
            with open(os.path.join(self.out, name), "wb") as f:
                f.write(data)
        lines = list(header)
        lines += ["", "# Encoded inputs (each file is the exact bytes of one string scalar)."]
        lines += self.jpeg_lines + self.example_lines
        lines += ["", "# Tensors (.bin): raw little-endian values, row-major; string: per element u32 length + bytes."]
        lines += self.tensor_lines
        lines += ["", "# Cases: one per line."]
        lines += self.case_lines
        with open(os.path.join(self.out, "manifest.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")


# ---- images ---------------------------------------------------------------------------------

def make_rgb(h, w, seed):
    """Deterministic RGB content with gradients, hard edges, a diagonal line and a little noise."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 255.0 * x / max(w - 1, 1)                          # horizontal ramp
    g = 255.0 * y / max(h - 1, 1)                          # vertical ramp
    b = np.where(((x // 5) + (y // 4)) % 2 == 0, 230.0, 25.0)  # checkerboard: hard edges
    cy, cx, rad = h * 0.55, w * 0.4, min(h, w) * 0.3
    disk = (y - cy) ** 2 + (x - cx) ** 2 < rad ** 2         # a saturated red disk
    r = np.where(disk, 250.0, r)
    g = np.where(disk, 10.0, g)
    line = np.abs(x - 1.3 * y - 3) < 1.0                   # thin white diagonal line
    img = np.stack([r, g, b], axis=-1)
    img[line] = 255.0
    noise = np.random.RandomState(seed).randint(-12, 13, size=img.shape)
    return np.clip(np.rint(img + noise), 0, 255).astype(np.uint8)


def make_gray(h, w, seed):
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    v = 128 + 100 * np.sin(x / 3.0) * np.cos(y / 5.0)
    v = np.where((x > w / 2) & (y < h / 2), 255 - v, v)  # a quadrant with inverted phase: edges
    noise = np.random.RandomState(seed).randint(-8, 9, size=v.shape)
    return np.clip(np.rint(v + noise), 0, 255).astype(np.uint8)


def pil_jpeg(arr, mode, **kw):
    buf = io.BytesIO()
    Image.fromarray(arr, mode).save(buf, "JPEG", **kw)
    return buf.getvalue()


def jpeg_inputs():
    """(name, bytes, meta tokens, channel options) for each fixture JPEG."""
    out = []
    a = make_rgb(29, 37, 1)
    out.append(("img_420_37x29", pil_jpeg(a, "RGB", quality=85, subsampling=2),
                "encoder=pil quality=85 subsampling=4:2:0 progressive=0 color=ycbcr", (3, 1, 0)))
    b = make_rgb(48, 64, 2)
    out.append(("img_444_64x48", pil_jpeg(b, "RGB", quality=90, subsampling=0),
                "encoder=pil quality=90 subsampling=4:4:4 progressive=0 color=ycbcr", (3, 1, 0)))
    c = make_rgb(22, 30, 3)
    out.append(("img_422_30x22", pil_jpeg(c, "RGB", quality=75, subsampling=1),
                "encoder=pil quality=75 subsampling=4:2:2 progressive=0 color=ycbcr", (3, 1, 0)))
    d = make_gray(29, 37, 4)
    out.append(("img_gray_37x29", pil_jpeg(d, "L", quality=80),
                "encoder=pil quality=80 subsampling=none progressive=0 color=grayscale", (1, 3, 0)))
    e = make_rgb(41, 53, 5)
    out.append(("img_prog420_53x41", pil_jpeg(e, "RGB", quality=80, subsampling=2, progressive=True),
                "encoder=pil quality=80 subsampling=4:2:0 progressive=1 color=ycbcr", (3, 1, 0)))
    f = make_rgb(27, 35, 6)
    tf_bytes = tf.io.encode_jpeg(tf.constant(f), quality=70).numpy()  # TF's encoder: 4:2:0
    out.append(("img_tfenc420_35x27", tf_bytes,
                "encoder=tf.io.encode_jpeg quality=70 subsampling=4:2:0 progressive=0 color=ycbcr",
                (3, 1, 0)))
    # CMYK (Adobe marker, inverted, as Pillow writes it). TF refuses channels=1 for CMYK
    # ("Unsupported color conversion request"), so only 0 and 3.
    g = make_rgb(18, 24, 7)
    cmyk = np.concatenate([255 - g, np.full(g.shape[:2] + (1,), 40, np.uint8)], axis=-1)
    out.append(("img_cmyk_24x18", pil_jpeg(cmyk, "CMYK", quality=90),
                "encoder=pil quality=90 subsampling=4:4:4 progressive=0 color=cmyk_adobe", (3, 0)))
    return out


# ---- reference computations used only for the report ----------------------------------------

def bilinear_f64(img, oh, ow):
    """Half-pixel-center bilinear resize in float64 (what tf.image.resize bilinear computes)."""
    h, w = img.shape[:2]
    src = img.astype(np.float64)

    def axis(o, n):
        scale = n / o
        c = (np.arange(o) + 0.5) * scale - 0.5
        lo = np.floor(c)
        frac = c - lo
        lo_i = np.clip(lo, 0, n - 1).astype(int)
        hi_i = np.clip(lo + 1, 0, n - 1).astype(int)
        return lo_i, hi_i, frac

    y0, y1, fy = axis(oh, h)
    x0, x1, fx = axis(ow, w)
    top = src[y0][:, x0] * (1 - fx)[None, :, None] + src[y0][:, x1] * fx[None, :, None]
    bot = src[y1][:, x0] * (1 - fx)[None, :, None] + src[y1][:, x1] * fx[None, :, None]
    return top * (1 - fy)[:, None, None] + bot * fy[:, None, None]


def bilinear_f32_emulation(img, oh, ow):
    """tf.image.resize bilinear done step by step in float32, in TF's kernel's order:
    in = (i + 0.5) * scale - 0.5, lower = max(floor(in), 0), upper = min(ceil(in), n - 1),
    lerp = in - floor(in); top = tl + (tr - tl) * xl; bottom likewise; top + (bottom - top) * yl."""
    f = np.float32
    src = img.astype(np.float32)
    h, w = img.shape[:2]

    def axis(o, n):
        scale = f(n) / f(o)
        c = (np.arange(o, dtype=np.float32) + f(0.5)) * scale - f(0.5)
        fl = np.floor(c)
        lo = np.maximum(fl, 0).astype(int)
        hi = np.minimum(np.ceil(c), n - 1).astype(int)
        return lo, hi, (c - fl).astype(np.float32)

    y0, y1, fy = axis(oh, h)
    x0, x1, fx = axis(ow, w)
    fx = fx[None, :, None]
    fy = fy[:, None, None]
    tl, tr = src[y0][:, x0], src[y0][:, x1]
    bl, br = src[y1][:, x0], src[y1][:, x1]
    top = tl + (tr - tl) * fx
    bot = bl + (br - bl) * fx
    return top + (bot - top) * fy


# ---- main -----------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures", "tf"))
    ap.add_argument("--report", action="store_true")
    args = ap.parse_args()

    w = Writer(args.out)
    report = []

    # -- decode_jpeg --
    decoded = {}
    for name, data, meta, channel_opts in jpeg_inputs():
        jname = name + ".jpg"
        probe = tf.io.decode_jpeg(data).numpy()
        h, wd, comps = probe.shape
        w.raw("jpeg", jname, data, w.jpeg_lines, f"width={wd} height={h} {meta}")
        fast_vs_acc = {}
        for ch in channel_opts:
            outs = {}
            for dct, tag in (("INTEGER_FAST", "fast"), ("INTEGER_ACCURATE", "accurate")):
                img = tf.io.decode_jpeg(data, channels=ch, dct_method=dct).numpy()
                outs[tag] = img
                exp = w.tensor(f"{name}.{tag}.c{ch}", img, "decode")
                w.case("decode_jpeg", f"{name}.{tag}.c{ch}",
                       [f"input={jname}", f"channels={ch}", f"dct_method={dct}"], exp)
                decoded[(name, tag, ch)] = (img, exp[0])
            default = tf.io.decode_jpeg(data, channels=ch).numpy()  # dct_method="" (TF default)
            assert np.array_equal(default, outs["fast"]), f"{name} c{ch}: default != INTEGER_FAST"
            diff = np.abs(outs["fast"].astype(np.int32) - outs["accurate"].astype(np.int32))
            fast_vs_acc[ch] = (int(diff.max()), float(diff.mean()), int((diff > 0).sum()), diff.size)
        report.append(f"decode {name}: FAST vs ACCURATE per channels: " + "; ".join(
            f"c{ch}: max {m}, mean {mean:.3f}, differing {n}/{tot}"
            for ch, (m, mean, n, tot) in fast_vs_acc.items()))

    # -- resize (input: a decoded image stored as a tensor) --
    src_img, src_file = decoded[("img_420_37x29", "fast", 3)]
    gray_img, gray_file = decoded[("img_gray_37x29", "fast", 0)]
    ev_img, ev_file = decoded[("img_444_64x48", "fast", 3)]
    base_of = lambda fname: fname[:-len(".bin")]  # noqa: E731
    resize_inputs = [(base_of(src_file), src_img, src_file), (base_of(gray_file), gray_img, gray_file)]
    sizes_rgb = [(16, 24), (41, 53), (40, 20), (29, 37), (1, 1)]  # down, up, mixed, same, 1x1
    sizes_gray = [(16, 24), (41, 53)]
    max_bilinear_dev = 0.0
    bilinear_emu_exact = True
    for base, img, fname in resize_inputs:
        sizes = sizes_rgb if img.shape[2] == 3 else sizes_gray
        for oh, ow in sizes:
            for method in ("bilinear", "nearest"):
                out = tf.image.resize(img, (oh, ow), method=method, antialias=False).numpy()
                exp = w.tensor(f"resize.{base}.{method}.{oh}x{ow}", out, "resize")
                w.case("resize", f"{base}.{method}.{oh}x{ow}",
                       [f"input={fname}", f"method={method}", "antialias=0",
                        f"height={oh}", f"width={ow}"], exp)
                if method == "bilinear":
                    ref = bilinear_f64(img, oh, ow)
                    max_bilinear_dev = max(max_bilinear_dev, float(np.abs(ref - out).max()))
                    emu = bilinear_f32_emulation(img, oh, ow)
                    bilinear_emu_exact &= emu.tobytes() == out.tobytes()
    # a float32 input (the bilinear upscale above), resized down again
    f_in = tf.image.resize(src_img, (41, 53), method="bilinear").numpy()
    f_file = w.tensor("resize.img_420_37x29.fast.c3.bilinear.41x53", f_in, "resize")[0]
    out = tf.image.resize(f_in, (20, 27), method="bilinear", antialias=False).numpy()
    w.case("resize", "float_input.bilinear.20x27",
           [f"input={f_file}", "method=bilinear", "antialias=0", "height=20", "width=27"],
           w.tensor("resize.float_input.bilinear.20x27", out, "resize"))
    max_bilinear_dev = max(max_bilinear_dev, float(np.abs(bilinear_f64(f_in, 20, 27) - out).max()))
    bilinear_emu_exact &= bilinear_f32_emulation(f_in, 20, 27).tobytes() == out.tobytes()
    report.append(f"resize bilinear: max |TF float32 - float64 reference| = {max_bilinear_dev:.3g}; "
                  f"float32 step-by-step emulation bit-exact with TF: {bilinear_emu_exact}")

    # -- center_crop: tf.image.resize_with_crop_or_pad to a size no larger than the image --
    for base, img, fname in [(base_of(f), i, f) for i, f in
                             ((src_img, src_file), (ev_img, ev_file), (gray_img, gray_file))]:
        h, wd = img.shape[:2]
        targets = {29: [(20, 30), (21, 31), (29, 36), (1, 1)], 48: [(33, 47), (32, 48), (48, 64)]}[h]
        for th, tw in targets:
            out = tf.image.resize_with_crop_or_pad(img, th, tw).numpy()
            oy, ox = (h - th) // 2, (wd - tw) // 2
            assert np.array_equal(out, img[oy:oy + th, ox:ox + tw]), (base, th, tw)
            exp = w.tensor(f"center_crop.{base}.{th}x{tw}", out, "center_crop")
            w.case("center_crop", f"{base}.{th}x{tw}",
                   [f"input={fname}", f"height={th}", f"width={tw}",
                    f"offset_height={oy}", f"offset_width={ox}"], exp)

    # -- random_crop: no TF expectation (TF's RNG cannot be matched); inputs for a window check --
    for th, tw in [(20, 30), (29, 37)]:
        w.case("random_crop", f"{base_of(src_file)}.{th}x{tw}",
               [f"input={src_file}", f"height={th}", f"width={tw}", "check=window"])

    # -- normalize: (tf.cast(x, tf.float32) - mean) / std, per channel --
    imagenet_mean = np.array([123.675, 116.28, 103.53], np.float32)  # 255 * (0.485, 0.456, 0.406)
    imagenet_std = np.array([58.395, 57.12, 57.375], np.float32)     # 255 * (0.229, 0.224, 0.225)
    norm_cases = [
        ("imagenet", src_img, src_file, imagenet_mean, imagenet_std),
        ("half", src_img, src_file, np.array([127.5], np.float32), np.array([127.5], np.float32)),
        ("gray", gray_img, gray_file, np.array([100.25], np.float32), np.array([3.0], np.float32)),
        ("float_input.imagenet", f_in, f_file, imagenet_mean, imagenet_std),
    ]
    for cid, img, fname, mean, std in norm_cases:
        out = ((tf.cast(img, tf.float32) - tf.constant(mean)) / tf.constant(std)).numpy()
        x = img.astype(np.float32)
        c = mean.size if mean.size > 1 else 1
        m, sd = np.resize(mean, c), np.resize(std, c)
        div_exact = ((x - m) / sd).tobytes() == out.tobytes()
        recip = (x - m) * (np.float32(1) / sd)
        report.append(f"normalize {cid}: numpy float32 (x - mean) / std bit-exact with TF: {div_exact}; "
                      f"(x - mean) * (1 / std) differs in {int((recip != out).sum())}/{out.size} values")
        exp = w.tensor(f"normalize.{cid}", out, "normalize")
        w.case("normalize", cid,
               [f"input={fname}", "mean=" + ",".join(f32_str(v) for v in mean),
                "std=" + ",".join(f32_str(v) for v in std)], exp)

    # -- parse_example --
    parse_examples(w)

    header = [
        "# tfdata pixel-parity fixtures: expected outputs computed by TensorFlow.",
        f"# tensorflow {tf.__version__}  numpy {np.__version__}  pillow {PIL.__version__}  "
        f"python {sys.version.split()[0]}",
        f"# made by (from the repo root): {COMMAND}",
        "# Format: see tests/fixtures/tf/README.md. Lines: '#' comment, 'jpeg ...', 'example ...',",
        "# 'tensor ...', 'case ...'; each line is a keyword then space-separated key=value tokens.",
    ]
    w.write(header)
    total = sum(len(d) for d in w.files.values())
    print(f"wrote {len(w.files)} files ({total} bytes) + manifest.txt to {args.out}; "
          f"{len(w.case_lines)} cases")
    if args.report:
        print("\n".join(report))


# ---- parse_example --------------------------------------------------------------------------

def _varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(field, payload):
    return _varint((field << 3) | 2) + _varint(len(payload)) + payload


def _unpacked_example(int_vals, float_vals):
    """An Example whose int64_list and float_list use the unpacked (non-packed) encoding."""
    ints = b"".join(_varint(1 << 3 | 0) + _varint(v) for v in int_vals)
    floats = b"".join(_varint(1 << 3 | 5) + struct.pack("<f", v) for v in float_vals)
    entry_i = _ld(1, _ld(1, b"ids") + _ld(2, _ld(3, ints)))      # Feature.int64_list = 3
    entry_f = _ld(1, _ld(1, b"vals") + _ld(2, _ld(2, floats)))   # Feature.float_list = 2
    return _ld(1, entry_i + entry_f)                             # Example.features = 1


def _dup_key_example():
    """The key 'label' twice in the features map: protobuf (and TF) keep the last entry."""
    def entry(v):
        return _ld(1, _ld(1, b"label") + _ld(2, _ld(3, _ld(1, _varint(v)))))
    return _ld(1, entry(1) + entry(2))


def parse_examples(w):
    I = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))  # noqa: E731
    F = lambda v: tf.train.Feature(float_list=tf.train.FloatList(value=v))  # noqa: E731
    B = lambda v: tf.train.Feature(bytes_list=tf.train.BytesList(value=v))  # noqa: E731

    def ser(feats):
        ex = tf.train.Example(features=tf.train.Features(feature=feats))
        return ex.SerializeToString(deterministic=True)  # map keys sorted: stable bytes

    f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]  # noqa: E731
    special = [-0.0, float("inf"), float("-inf"), f32(1e-45), f32(3.4028235e38), float("nan")]
    examples = {
        "ex_basic": (ser({
            "label": I([3]),
            "text": B([b"the cat sat"]),
            "scores": F([0.5, 1.5]),
            "weight": F([0.1]),
            "ids": I([-(1 << 63), (1 << 63) - 1, -1, 0, 300]),
            "specials": F(special),
            "tokens": B([b"", b"\x00\xff\xfe binary", "h\u00e9llo".encode()]),
            "matrix": I([0, 1, 2, 3, 4, 5]),
            "image/encoded": B([b"\xff\xd8\xff not really a jpeg"]),
            "empty_floats": F([]),
        }), "made=SerializeToString_deterministic"),
        "ex_missing": (ser({
            "text": B([b"no label here"]),
            "ids": I([7, 8]),
        }), "made=SerializeToString_deterministic"),
        "ex_unpacked": (_unpacked_example([5, -3, 1 << 40], [0.25, -2.0, 1e10]),
                        "made=hand_encoded_unpacked_lists"),
        "ex_dupkey": (_dup_key_example(), "made=hand_encoded_key_label_twice_1_then_2"),
    }
    for name, (data, how) in examples.items():
        w.raw("example", f"{name}.pb", data, w.example_lines, how)

    tfd = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}

    def default_tokens(dtype, default):
        if default is None:
            return "none"
        vals = default if isinstance(default, list) else [default]
        if dtype == "string":
            return ",".join("hex:" + v.hex() for v in vals)
        if dtype == "float32":
            return ",".join(f32_str(v) for v in vals)
        return ",".join(str(int(v)) for v in vals)

    # (example, feature, dtype, spec shape or "var", default)
    specs = [
        ("ex_basic", "label", "int64", [], None),
        ("ex_basic", "text", "string", [], None),
        ("ex_basic", "scores", "float32", [2], None),
        ("ex_basic", "weight", "float32", [], None),
        ("ex_basic", "ids", "int64", [5], None),
        ("ex_basic", "specials", "float32", [6], None),
        ("ex_basic", "tokens", "string", [3], None),
        ("ex_basic", "matrix", "int64", [2, 3], None),
        ("ex_basic", "matrix", "int64", [3, 1, 2], None),
        ("ex_basic", "image/encoded", "string", [], None),
        ("ex_basic", "empty_floats", "float32", [0], None),
        ("ex_basic", "label", "int64", [], -1),          # present: the default is not used
        ("ex_basic", "ids", "int64", "var", None),
        ("ex_basic", "tokens", "string", "var", None),
        ("ex_basic", "empty_floats", "float32", "var", None),
        ("ex_missing", "label", "int64", [], -1),
        ("ex_missing", "scores", "float32", [2], [0.5, -1.25]),
        ("ex_missing", "text", "string", [], None),
        ("ex_missing", "title", "string", [], b"untitled"),
        ("ex_missing", "tokens", "string", [2], [b"a", b""]),
        ("ex_missing", "matrix", "int64", [2, 2], [1, 2, 3, 4]),
        ("ex_missing", "ids", "int64", [2], None),
        ("ex_unpacked", "ids", "int64", [3], None),
        ("ex_unpacked", "vals", "float32", [3], None),
        ("ex_unpacked", "ids", "int64", "var", None),
        ("ex_dupkey", "label", "int64", [], None),
    ]
    seen = set()
    for ex_name, feat, dtype, shape, default in specs:
        data = examples[ex_name][0]
        if shape == "var":
            res = tf.io.parse_single_example(data, {feat: tf.io.VarLenFeature(tfd[dtype])})[feat]
            out = tf.sparse.to_dense(res).numpy()
            spec_tokens = ["var_len=1", "spec_shape=none"]
            tag = "var"
        else:
            fl = tf.io.FixedLenFeature(shape, tfd[dtype], default_value=default)
            out = tf.io.parse_single_example(data, {feat: fl})[feat].numpy()
            spec_tokens = ["var_len=0", f"spec_shape={shape_str(shape)}"]
            tag = "x".join(str(d) for d in shape) if shape else "scalar"
        if default is not None:
            tag += ".default"
        cid = f"{ex_name}.{feat.replace('/', '_')}.{tag}"
        assert cid not in seen, cid
        seen.add(cid)
        if dtype == "string":
            value = np.asarray(out, dtype=object)
        else:
            value = np.asarray(out, dtype={"int64": np.int64, "float32": np.float32}[dtype])
        exp = w.tensor(f"parse.{cid}", value, "parse_example")
        w.case("parse_example", cid,
               [f"input={ex_name}.pb", f"feature={feat}", f"feature_dtype={dtype}"] + spec_tokens
               + [f"default={default_tokens(dtype, default)}"], exp)


if __name__ == "__main__":
    main()
