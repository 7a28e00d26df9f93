"""diloco.py — geotrain.DiLoCo: a PyTorch training loop as one site of a DiLoCo run.

    with geotrain.DiLoCo(model, opt) as diloco:      # config and site: GT_CONFIG / GT_SITE
        while not diloco.done:
            loss = loss_fn(model(x), y); loss.backward(); opt.step(); opt.zero_grad()
            diloco.step(tokens=x.numel(), loss=loss.item())

The one loop shape is `while not diloco.done`: with outer.catch_up a round can end early (the
step counter jumps to its end), so the number of iterations is not known in advance; a
schedule that follows the run (the learning rate's) reads diloco.step_count.

The library's θ_s is one flat float32 host vector (docs/api.md). The model's parameters — any
device, any floating dtype, mixed, in the order of model.parameters() — map onto it
(_params.py): a CPU float32 parameter becomes a view into it (no copies at all); any other is
copied into it only when the library is about to read it (a submit, an apply) and back only
after it wrote it (an apply), through the library's before_read / after_write hooks. The
optimizer (which holds the Parameter objects) and its state stay where they are. After the run
the parameters hold the final anchor.

A site of several ranks is a torch.distributed job: every rank creates the DiLoCo after
init_process_group, and the library's in-site collectives run over the site's process group
(_dist.py). A rank holds either the whole model (DDP replicas) or, with shard=(offset, total),
a contiguous shard of the site's flat vector (ZeRO-3 / FSDP style).

Everything else runs in the library (diloco/, libgeotrain.so): the schedule of submits and
applies, the WAN, membership, joins. Errors raise geotrain.GeotrainError with the library's
message. One thread drives a DiLoCo (the one that created it): a call from another thread, or
one made while another call is running, raises.

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


def _named(model):
    """[(name, Parameter)] in the order of model.parameters() (a module, or an iterable of
    tensors)."""
    if hasattr(model, "named_parameters"):
        return list(model.named_parameters())
    return [("#%d" % i, p) for i, p in enumerate(model)]


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

    model: an nn.Module (DDP-wrapped or not) or an iterable of parameters, on any device, in
    any floating dtype (mixed is fine). A site of several ranks: call
    torch.distributed.init_process_group first, on every rank; group: the site's process group
    (default: the whole job). shard=(offset, total): this rank holds elements [offset, offset +
    its count) of the site's flat vector of `total` (its parameters in order), the site's ranks
    tile it without gaps, and every site must shard alike (checked at create); default: every
    rank holds all parameters (replicas, e.g. DDP).
    """

    def __init__(self, model, optimizer=None, config=None, site=None, run_dir=None,
                 sets=None, metrics=True, checkpoint_dir=None, resume=None, shard=None,
                 group=None):
        lib = _library()
        self._lib = lib
        self._handle = None
        self._thread = threading.get_ident()
        self._busy = threading.Lock()
        self._hook_error = None
        self._comm = None
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
        from . import _params  # torch is imported only once a DiLoCo is made
        self._comm = self._site_comm(group)
        try:
            self._flat = _params.Flat(_named(model), shard, self._comm)
        except ValueError as e:
            raise GeotrainError("geotrain.DiLoCo", -1, str(e)) from None
        self._check_shards()
        self._params = [p for _, p in self._flat.named]
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
        host = self._flat.host
        p.params = ctypes.cast(ctypes.c_void_p(host.data_ptr()), ctypes.POINTER(ctypes.c_float))
        p.n_params = host.numel()
        if self._flat.sharded:  # every site must shard alike: the library compares this text
            p.layout = cstr(self._flat.layout_text())
        if self._comm is not None:
            self._comm.fill(p.comm)
        # every parameter is checked at each read and write; copied only if not a view
        self._before_read = _lib.HOOK(self._hook_read)
        self._after_write = _lib.HOOK(self._hook_write)
        p.before_read = self._before_read
        p.after_write = self._after_write
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
            self._call("geotrain.DiLoCo", lib.gt_diloco_create, ctypes.byref(p),
                       ctypes.byref(handle))
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
        """After each optimizer step: tokens trained in it (this site's weight) and its loss;
        compute_s: the step's compute time in seconds (default: measured, the time since the
        previous call; a given time is capped at that). Submits at the end of a round and
        applies the agreed result at r·H + H + τ, writing the parameters in place. Raises
        Stopped when the site is asked to leave, GeotrainError after the last step (loop
        `while not diloco.done`) or when the parameters were moved, re-typed or re-allocated
        since the DiLoCo was created."""
        if self._handle is None:
            raise GeotrainError("DiLoCo.step", -14, "the context is closed")
        if self.done:
            raise GeotrainError("DiLoCo.step", -1, "the run is over for this site (diloco.done): "
                                "loop `while not diloco.done`, not over a fixed step count")
        before = self._status().rounds_applied
        self._call("DiLoCo.step", self._lib.gt_diloco_step_timed, self._handle, int(tokens),
                   float(loss), -1.0 if compute_s is None else float(compute_s))
        self._applied = self._status().rounds_applied != before

    @property
    def done(self):
        """Whether the run is over for this site (its last round applied): the loop is
        `while not diloco.done:` (with outer.catch_up a round can end early and the step
        counter jump to its end, so no fixed count of steps is right)."""
        return self._status().state == _lib.STATES.index("done")

    # ---- calls into the library: one thread, one call at a time ----

    def _call(self, what, fn, *args, ok=(_lib.GT_OK,)):
        """fn(*args) under the guard, the hooks' and collectives' exceptions re-raised; returns
        the status when it is one of `ok`, else raises."""
        me = threading.get_ident()
        if me != self._thread:
            raise GeotrainError(what, -1, "called from thread %d, but this DiLoCo is driven by "
                                "thread %d (the one that created it): one thread drives a site"
                                % (me, self._thread))
        if not self._busy.acquire(blocking=False):
            raise GeotrainError(what, -1, "called while another call into this DiLoCo is "
                                "running (from a hook, a callback or a signal handler)")
        try:
            self._hook_error = None
            if self._comm is not None:
                self._comm.error = None
            code = fn(*args)
        finally:
            self._busy.release()
        err = self._hook_error or (self._comm.error if self._comm is not None else None)
        if code in ok:
            return code
        if err is not None:
            if type(err).__name__ == "MisuseError":  # _params.MisuseError
                raise GeotrainError(what, -1, str(err)) from None
            raise GeotrainError(what, code, "%s: %s" % (type(err).__name__, err)) from err
        _check(what, code)
        return code

    def _hook_read(self, ctx):
        try:
            self._flat.pull(self._model_params())
            return 0
        except BaseException as e:  # noqa: B902 — must not unwind through C
            self._hook_error = self._hook_error or e
            return -1

    def _hook_write(self, ctx):
        try:
            self._flat.push(self._model_params())
            return 0
        except BaseException as e:  # noqa: B902
            self._hook_error = self._hook_error or e
            return -1

    def _model_params(self):
        m = self._model
        return m.parameters() if hasattr(m, "parameters") else None

    # ---- a site of several ranks ----

    def _site_comm(self, group):
        """The site's ranks (torch.distributed), or None for a site of one rank."""
        want = os.environ.get("GT_RANKS")
        try:
            import torch.distributed as dist
            up = dist.is_available() and dist.is_initialized()
        except ImportError:
            up = False
        if not up:
            if want and want.isdigit() and int(want) > 1:
                raise GeotrainError("geotrain.DiLoCo", -1, "this site has %s ranks: call "
                                    "torch.distributed.init_process_group() on every rank "
                                    "before geotrain.DiLoCo()" % want)
            return None
        from . import _dist
        comm = _dist.SiteComm(group)
        return comm if comm.size > 1 else None

    def _check_shards(self):
        """The site's ranks tile the flat vector (sharded), or all hold all of it (replicas):
        the same on every rank, or an error on every rank."""
        f, comm = self._flat, self._comm
        if comm is None:
            if f.sharded and (f.offset != 0 or f.count != f.total):
                raise GeotrainError("geotrain.DiLoCo", -1, "shard=(%d, %d) on a site of one "
                                    "rank: it must hold the whole vector (%d elements, it has %d)"
                                    % (f.offset, f.total, f.total, f.count))
            return
        rows = comm.allgather_ints([int(f.sharded), f.offset, f.count, f.total])
        problem = None
        if len({r[0] for r in rows}) > 1:
            problem = "some ranks pass shard= and some do not"
        elif len({r[3] for r in rows}) > 1:
            problem = "the ranks' totals differ (%s)" % [r[3] for r in rows]
        elif f.sharded:
            pos = 0
            for k, (_, o, c, _) in enumerate(rows):
                if o != pos:
                    problem = "rank %d starts at %d, not %d where rank %d ends" % (k, o, pos, k - 1)
                    break
                pos = o + c
            if problem is None and pos != f.total:
                problem = "the shards end at %d, not at the total %d" % (pos, f.total)
        elif len({r[2] for r in rows}) > 1:
            problem = "unsharded ranks hold different parameter counts (%s)" % [r[2] for r in rows]
        if problem:
            raise GeotrainError("geotrain.DiLoCo", -1, "the site's ranks do not tile its "
                                "parameters: %s (rank by rank, offset:end = %s)" % (problem, ", "
                                .join("%d:%d" % (r[1], r[1] + r[2]) for r in rows)))
        if f.sharded:
            f.shards = [(r[1], r[2]) for r in rows]

    @property
    def rank(self):
        """This process's rank in its site (0 for a site of one rank)."""
        return self._comm.rank if self._comm is not None else 0

    @property
    def ranks(self):
        """The site's ranks."""
        return self._comm.size if self._comm is not None else 1

    @property
    def layout(self):
        """How the site's ranks hold the parameters, e.g. "2 shards [0:289, 289:577] of 577"."""
        return self._flat.layout_text()

    @property
    def applied(self):
        """Whether the last step() applied a round: the moment save() may be called."""
        return self._applied

    # ---- checkpoints ----

    _TORCH = re.compile(r"^torch-(\d{12})(-rank\d+)?\.pt$")

    def _torch_path(self, step):
        rank = "-rank%d" % self.rank if self.ranks > 1 else ""
        return os.path.join(self._ckpt_dir, "torch-%012d%s.pt" % (step, rank))

    def _torch_steps(self):
        """The steps this site has a model/optimizer checkpoint for (written atomically, so a
        file that exists is whole; the library checks its own outer state's checksum)."""
        try:
            names = os.listdir(self._ckpt_dir)
        except FileNotFoundError:
            return []
        rank = "-rank%d" % self.rank if self.ranks > 1 else None
        return sorted(int(m.group(1)) for m in map(self._TORCH.match, names)
                      if m and m.group(2) == rank)

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
        self._call("DiLoCo.save", self._lib.gt_diloco_save, self._handle,
                   os.fsencode(os.path.join(self._ckpt_dir, "outer")), int(keep))
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
        self._call("DiLoCo.set_result", self._lib.gt_diloco_set_result, self._handle,
                   key.encode(), float(value))

    def close(self, error=None):
        """Leaves the run: summary.json, deregistration. Called by the with-block."""
        if self._handle is None:
            return
        code = _lib.GT_OK
        if isinstance(error, (Stopped, KeyboardInterrupt)):
            code = _lib.GT_ERR_CLOSED
        elif error is not None:
            code = error.code if isinstance(error, GeotrainError) else -15
        handle = self._handle
        self._call("DiLoCo.close", self._lib.gt_diloco_close, handle, code, ok=(None,))
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
    def run_steps(self):
        """The run's length in steps (run.rounds x H), for a schedule that follows the run with
        step_count; not a loop bound (loop `while not diloco.done`)."""
        return self._started.total_steps

    @property
    def total_steps(self):
        raise AttributeError("DiLoCo.total_steps is not a loop bound: with outer.catch_up a "
                             "round can end early, so loop `while not diloco.done:`; the run's "
                             "length is diloco.run_steps and the step diloco.step_count")

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
            code = self._call("DiLoCo.summary", self._lib.gt_diloco_summary, self._handle, buf,
                              cap, ctypes.byref(need), ok=(_lib.GT_OK, -13))
            if code == -13 and need.value + 1 > cap:  # GT_ERR_OVERFLOW
                cap = need.value + 1
                continue
            _check("DiLoCo.summary", code)
            return json.loads(buf.value.decode())

    @property
    def parameters(self):
        """The library's flat float32 host vector θ_s (the site's whole vector; CPU float32
        parameters are views into it, the others are copied at each submit and apply)."""
        return self._flat.host

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
