"""diloco.py — geotrain.DiLoCo: a PyTorch training loop as one site of a DiLoCo run.

    with geotrain.DiLoCo(model, opt) as diloco:      # config and site: GT_CONFIG / GT_SITE
        for step in range(diloco.total_steps):
            loss = loss_fn(model(x), y); loss.backward(); opt.step(); opt.zero_grad()
            diloco.step(tokens=x.numel(), loss=loss.item())

The model's parameters (CPU float32, in the order of model.parameters()) are moved once into
one flat torch tensor, and each parameter's .data becomes a view into it; the library gets
that tensor's address. So the outer step and the rebase write torch's memory directly: no
Python-side copies per round, and the optimizer (which holds the Parameter objects) goes on
as before. After the run the parameters hold the final anchor.

Everything runs in the library (diloco/, libgeotrain.so): the schedule of submits and applies,
the WAN, membership, joins. Errors raise geotrain.GeotrainError with the library's message.

Checkpoints and resume of a whole run: call diloco.save() right after a step that applied a
round (diloco.applied is then True): it writes the model's and the optimizer's state
(torch.save, atomically) and the library's outer state (anchor, momentum, residuals, round)
for that step into checkpoint_dir. A DiLoCo created with resume=True (the default under
`geotrain launch --resume RUN_DIR -- CMD`, which sets GT_RESUME=1) offers the steps it has
intact checkpoints for; the sites agree on the newest step all of them have, and the model
and optimizer are loaded from it before the constructor returns; first_step is that step.
"""
import ctypes
import json
import os
import re
import signal
import threading

from . import _lib

_LIB = None


def _library():
    global _LIB
    if _LIB is None:
        _LIB = _lib.load()
    return _LIB


class GeotrainError(RuntimeError):
    """A call into libgeotrain failed; the message is the library's."""

    def __init__(self, what, code, message):
        self.code = code
        self.status = _lib.status_str(code)
        text = "%s: %s" % (what, message or self.status)
        if message and self.status not in message:
            text += " (%s)" % self.status
        super().__init__(text)


class Stopped(GeotrainError):
    """The site was asked to leave the run (SIGTERM from `geotrain launch`, or stop())."""


def _check(what, code):
    if code == _lib.GT_OK:
        return
    raw = _library().gt_diloco_error_message()
    message = raw.decode("utf-8", "replace") if raw else ""
    cls = Stopped if code == _lib.GT_ERR_CLOSED else GeotrainError
    raise cls(what, code, message)


def _flatten(model):
    """One float32 CPU tensor holding every parameter; each parameter's .data a view into it."""
    import torch
    params = list(model.parameters())
    if not params:
        raise GeotrainError("geotrain.DiLoCo", -1, "the model has no parameters")
    for i, p in enumerate(params):
        if p.dtype != torch.float32 or p.device.type != "cpu":
            raise GeotrainError("geotrain.DiLoCo", -1,
                                "parameter %d is %s on %s: the package works on float32 CPU "
                                "parameters" % (i, p.dtype, p.device))
    n = sum(p.numel() for p in params)
    flat = torch.empty(n, dtype=torch.float32)
    off = 0
    with torch.no_grad():
        for p in params:
            k = p.numel()
            flat[off:off + k].copy_(p.data.reshape(-1))
            p.data = flat[off:off + k].view_as(p)
            off += k
    return flat, params


class DiLoCo:
    """One site of a DiLoCo run around a PyTorch model and its optimizer.

    config: sites.yaml path (default $GT_CONFIG, with the overrides in $GT_SET);
    site: this site's name (default $GT_SITE); run_dir (default $GT_RUN_DIR, else
    run.run_dir/run.name); sets: list of "KEY=VALUE" overrides for config; metrics: write
    RUN_DIR/SITE/metrics.jsonl. checkpoint_dir: where save() writes and a resume reads
    (default RUN_DIR/SITE/checkpoints when run_dir and site are known); resume: continue a
    stopped run from checkpoint_dir (default: $GT_RESUME is 1). Creating it joins the run
    (blocks until every site is there, or — for a site that starts late — until it has fetched
    the agreed anchor, or — resuming — until the sites agreed on the step and the model and
    optimizer are loaded from it).
    """

    def __init__(self, model, optimizer=None, config=None, site=None, run_dir=None,
                 sets=None, metrics=True, checkpoint_dir=None, resume=None):
        lib = _library()
        self._lib = lib
        self._handle = None
        self._model, self._optimizer = model, optimizer
        self._applied = False
        if checkpoint_dir is None:
            rd = run_dir or os.environ.get("GT_RUN_DIR")
            st = site or os.environ.get("GT_SITE")
            if rd and st:
                checkpoint_dir = os.path.join(rd, st, "checkpoints")
        self._ckpt_dir = os.fspath(checkpoint_dir) if checkpoint_dir is not None else None
        if resume is None:
            resume = os.environ.get("GT_RESUME") == "1"
        if resume and self._ckpt_dir is None:
            raise GeotrainError("geotrain.DiLoCo", -1, "resume needs checkpoint_dir (or "
                                "run_dir and site) to find the checkpoints in")
        self._flat, self._params = _flatten(model)
        if optimizer is not None:
            mine = {id(p) for p in self._params}
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if id(p) not in mine:
                        raise GeotrainError("geotrain.DiLoCo", -1,
                                            "the optimizer has a parameter the model does not")
        self._stop = ctypes.c_int(0)
        p = _lib.Params()
        lib.gt_diloco_params_init(ctypes.byref(p))
        keep = []  # what the library borrows during create

        def cstr(s):
            if s is None:
                return None
            b = os.fsencode(s) if isinstance(s, os.PathLike) else str(s).encode()
            keep.append(b)
            return b

        p.config_path = cstr(config)
        if sets:
            arr = (ctypes.c_char_p * len(sets))(*[cstr(x) for x in sets])
            keep.append(arr)
            p.sets = arr
            p.n_sets = len(sets)
        p.site = cstr(site)
        p.run_dir = cstr(run_dir)
        p.params = ctypes.cast(ctypes.c_void_p(self._flat.data_ptr()),
                               ctypes.POINTER(ctypes.c_float))
        p.n_params = self._flat.numel()
        p.stop = ctypes.pointer(self._stop)
        p.metrics = 1 if metrics else 0
        p.env = 1
        if resume:
            steps = self._torch_steps()
            p.resume_dir = cstr(os.path.join(self._ckpt_dir, "outer"))
            arr = (ctypes.c_uint64 * max(1, len(steps)))(*steps)
            keep.append(arr)
            p.resume_steps = arr
            p.n_resume_steps = len(steps)
        handle = ctypes.c_void_p()
        self._install_sigterm()
        try:
            _check("geotrain.DiLoCo", lib.gt_diloco_create(ctypes.byref(p), ctypes.byref(handle)))
        except BaseException:
            self._restore_sigterm()
            raise
        self._handle = handle
        self._started = self._status()
        self._done = False
        if self._started.resumed_step >= 0:
            try:
                self._load(self._started.resumed_step)
            except BaseException:
                self.close(GeotrainError("geotrain.DiLoCo", -1, "cannot load the checkpoint"))
                raise

    # ---- the loop ----

    def step(self, tokens=0, loss=float("nan"), compute_s=None):
        """After each optimizer step: tokens trained in it (this site's weight) and its loss.
        Submits at the end of a round and applies the agreed result at r·H + H + τ, writing the
        parameters in place. Raises Stopped when the site is asked to leave."""
        if self._handle is None:
            raise GeotrainError("DiLoCo.step", -14, "the context is closed")
        before = self._status().rounds_applied
        code = self._lib.gt_diloco_step_timed(self._handle, int(tokens), float(loss),
                                              -1.0 if compute_s is None else float(compute_s))
        _check("DiLoCo.step", code)
        self._applied = self._status().rounds_applied != before

    @property
    def done(self):
        """Whether the run is over for this site: its last round applied. With outer.catch_up a
        round can end early (step_count jumps to its end), so loop `while not diloco.done:`
        rather than over range(total_steps)."""
        return self._status().state == _lib.STATES.index("done")

    @property
    def applied(self):
        """Whether the last step() applied a round: the moment save() may be called."""
        return self._applied

    # ---- checkpoints ----

    _TORCH = re.compile(r"^torch-(\d{12})\.pt$")

    def _torch_path(self, step):
        return os.path.join(self._ckpt_dir, "torch-%012d.pt" % step)

    def _torch_steps(self):
        """The steps this site has a model/optimizer checkpoint for (written atomically, so a
        file that exists is whole; the library checks its own outer state's checksum)."""
        try:
            names = os.listdir(self._ckpt_dir)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(self._TORCH.match, names) if m)

    def save(self, keep=2):
        """Checkpoints this site at the current step, which must be right after a step that
        applied a round (applied is True): the library's outer state, then the model and
        optimizer (torch.save to a temporary file, fsync, rename), into checkpoint_dir; keeps
        the newest `keep` of each. Every site of the run should save at the same steps."""
        import torch
        if self._handle is None:
            raise GeotrainError("DiLoCo.save", -14, "the context is closed")
        if self._ckpt_dir is None:
            raise GeotrainError("DiLoCo.save", -1, "no checkpoint_dir (nor run_dir and site)")
        step = self._status().step
        os.makedirs(self._ckpt_dir, exist_ok=True)
        _check("DiLoCo.save", self._lib.gt_diloco_save(
            self._handle, os.fsencode(os.path.join(self._ckpt_dir, "outer")), int(keep)))
        state = {"step": step, "model": self._model.state_dict()}
        if self._optimizer is not None:
            state["optimizer"] = self._optimizer.state_dict()
        path = self._torch_path(step)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(self._ckpt_dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        for old in self._torch_steps()[:-max(1, int(keep))]:
            os.unlink(self._torch_path(old))

    def _load(self, step):
        """The model and optimizer as saved at `step` (the step the run resumed at)."""
        import torch
        state = torch.load(self._torch_path(step))
        with torch.no_grad():  # into the library's buffer: the parameters are views of it
            self._model.load_state_dict(state["model"])
        if self._optimizer is not None and "optimizer" in state:
            self._optimizer.load_state_dict(state["optimizer"])

    @property
    def resumed_step(self):
        """The step the run resumed at (resume=True), or -1."""
        return self._started.resumed_step

    def stop(self):
        """Asks the site to leave at its next step (as SIGTERM does)."""
        self._stop.value = 1

    def set_result(self, key, value):
        """A number for summary.json (e.g. the final model's evaluation loss)."""
        _check("DiLoCo.set_result",
               self._lib.gt_diloco_set_result(self._handle, key.encode(), float(value)))

    def close(self, error=None):
        """Leaves the run: summary.json, deregistration. Called by the with-block."""
        if self._handle is None:
            return
        code = _lib.GT_OK
        if isinstance(error, (Stopped, KeyboardInterrupt)):
            code = _lib.GT_ERR_CLOSED
        elif error is not None:
            code = error.code if isinstance(error, GeotrainError) else -15
        self._lib.gt_diloco_close(self._handle, code)
        self._handle = None
        self._restore_sigterm()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close(exc)
        return False

    def __del__(self):
        """A context never closed leaves the run when collected: finished if it was done."""
        try:
            if self._handle is not None:
                done = _lib.STATES[self._status().state] == "done"
                self.close(None if done else Stopped("DiLoCo", -14, "not closed"))
        except Exception:
            pass

    # ---- what it knows ----

    def _status(self):
        s = _lib.Status()
        if self._handle is not None:
            self._lib.gt_diloco_status(self._handle, ctypes.byref(s))
        return s

    @property
    def total_steps(self):
        """Steps this site trains: the run's steps less those it joined after."""
        return self._started.total_steps - self._started.first_step

    @property
    def first_step(self):
        """The run's step this site started at (0, or R·H + τ for a site that joined)."""
        return self._started.first_step

    @property
    def step_count(self):
        """The run's step counter (first_step + the steps taken; with outer.catch_up it jumps
        to a round's end when the round ends early: a schedule that follows the run, such as
        the learning rate's, should follow it)."""
        return self._status().step

    @property
    def site_index(self):
        """This site's index in the config's sites (0 .. n_sites - 1), e.g. for its data share."""
        return self._started.site_index

    @property
    def n_sites(self):
        return self._started.n_sites

    @property
    def inner_steps(self):
        """H: inner steps per outer round."""
        return self._started.inner_steps

    @property
    def round(self):
        """The outer round being trained (step // H)."""
        return self._status().round

    @property
    def rounds_applied(self):
        return self._status().rounds_applied

    @property
    def state(self):
        return _lib.STATES[self._status().state]

    def status(self):
        """The live counters as a dict."""
        s = self._status()
        out = {name: getattr(s, name) for name, _ in _lib.Status._fields_}
        out["state"] = _lib.STATES[s.state]
        return out

    def summary(self):
        """The fields of summary.json, so far (a dict)."""
        if self._handle is None:
            raise GeotrainError("DiLoCo.summary", -14, "the context is closed")
        need = ctypes.c_size_t(0)
        cap = 8192
        while True:
            buf = ctypes.create_string_buffer(cap)
            code = self._lib.gt_diloco_summary(self._handle, buf, cap, ctypes.byref(need))
            if code == -13 and need.value + 1 > cap:  # GT_ERR_OVERFLOW
                cap = need.value + 1
                continue
            _check("DiLoCo.summary", code)
            return json.loads(buf.value.decode())

    @property
    def parameters(self):
        """The flat float32 tensor the parameters are views of (the library's buffer)."""
        return self._flat

    # ---- signals ----

    def _install_sigterm(self):
        """SIGTERM (launch's Ctrl-C, or an orderly stop) makes the next step raise Stopped, so
        the site leaves cleanly, unless the program handles SIGTERM itself."""
        self._sigterm = None
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)
        if previous not in (signal.SIG_DFL, None):
            return
        stop = self._stop

        def on_term(signum, frame):
            stop.value = 1

        signal.signal(signal.SIGTERM, on_term)
        self._sigterm = previous

    def _restore_sigterm(self):
        """Gives SIGTERM back its default once the site has left."""
        if getattr(self, "_sigterm", None) is not None and \
                threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._sigterm)
            self._sigterm = None
