"""Interoperability with DSH's released persistence code (the ``upstream`` resource).

The suite installs the exact upstream packages (``upstream.PACKAGES``) and a Node 22 binary
into a cache directory outside the work tree (``upstream.install``), has the real upstream
JSONL backend write, crash and read sessions through our driver (``driver.mjs``), and
compares dsh-store with upstream's own verdict on every log and crash state.

Every test is marked ``@pytest.mark.requires("upstream")``: it skips with one line when npm
or the registry is unreachable or the install fails, and ``.ci/run`` (which requires
``upstream``) turns such a skip into a failure. The install runs once per test session,
with a timeout (``DSH_STORE_UPSTREAM_TIMEOUT``, default 300 s). Everything random is drawn
from one seed, printed in every assertion (and in pytest's header when ``tests/interop`` is
named on the command line); set ``DSH_STORE_INTEROP_SEED`` to rerun a failure. The written
logs are byte-identical for one seed (the driver gets a deterministic clock and flushes only
where the script says), so a failing file is reproduced exactly; only the SIGKILL points
depend on timing.

Modules: ``test_written`` (the sessions upstream wrote, its repair, ``list``, identity
binding), ``test_truncation`` and ``test_truncation_zstd`` (prefix sweeps), ``test_kills``
(real SIGKILLs of the upstream writer, and the driver's zstd switch), ``test_damage``
(hand-made damage to logs and roots, with the known departures listed in its docstring),
``test_corpus_lenient`` (the shared corpus's refused logs, read by upstream and by the
lenient opt-in), ``test_install`` (an install killed by SIGKILL, a damaged cache).

The comparison, per log (upstream ``inspect`` + ``readFrom`` + ``deriveMessages`` against
dsh-store ``read_log`` of the same bytes, which migrates the format-0 log to v4 in memory):

- **verdict**: accepted or refused (any upstream error; any ``DshStoreError``);
- **events kept**: upstream's stored events (``readFrom(id, 0)``, no closers) against the
  source events in dsh-store's committed prefix (``LogScanner.event_count``: packed rows
  count their members), both in format-0 terms since migration renumbers;
- **closers**, in order: type; for a tool result the call id, the error code and the
  concatenated text parts (format 0: the ``tool-result`` block inside a user-role message;
  v4: the tool-role message); for ``turn/end`` the reason; ids and seqs are not compared
  (both embed renumbered seqs);
- **conversation**: ``deriveMessages()`` of the balanced view against v4
  ``derive_messages()`` of the migrated balanced view, as a list of normalized messages:
  user messages as (role, id, source kind, parts), assistant messages as (id, parts), tool
  results as (call id, isError, parts), where a format-0 user-role message carrying
  ``tool-result`` blocks maps to one tool message per block and a part is (type, text) for
  text and reasoning, (id, name, arguments) for a tool call, its canonical JSON otherwise.
  v4 system messages are not in upstream's derived history (format 0 keeps the prompt in
  the request header), so the v4 system message's text is compared with upstream's folded
  ``requestHeader().system`` instead;
- **list**: the (id, cwd, createdAt, delegationDepth, parentSession, seeded) facts of every
  header (format-0 ``seedLength`` present <=> v4 ``isSeeded``).

zstd: the driver writes zstd logs with ``"compression": "zstd"`` (upstream's default);
``test_written_zstd`` runs the comparisons of ``test_written`` on them and
``test_truncation_zstd`` sweeps their prefixes (every offset of the last two frames, every
frame boundary, a seeded sample of the rest), torn final frames included.
"""
