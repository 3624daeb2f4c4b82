"""A small in-memory Hugging Face Hub over real HTTP on 127.0.0.1, for testing `prbench release push`.

It implements the part of the Hub HTTP API that huggingface_hub 2.4.0 uses for create_repo, list_repo_refs,
upload_folder (README metadata check, preupload, ndjson commit), create_tag and repo_info:

    POST /api/repos/create                                     create a repo (409 with its url if it exists)
    POST /api/validate-yaml                                    README front matter must be a YAML mapping
    GET  /api/whoami-v2                                        who the token belongs to
    GET  /api/{type}s/{owner}/{name}[/revision/{rev}]          repo info (sha, siblings)
    GET  /api/{type}s/{owner}/{name}/refs                      branches, tags
    POST /api/{type}s/{owner}/{name}/preupload/{rev}           every file is "regular": no LFS or Xet transfer
    POST /api/{type}s/{owner}/{name}/commit/{rev}              ndjson header + base64 "file" / "deletedFile" lines
    POST /api/{type}s/{owner}/{name}/tag/{rev}                 409 when the tag exists; tags never move

Anything else is a 404 and is recorded in `unknown_routes`. One token is accepted; a wrong token gets the Hub's
401 "Invalid credentials in Authorization header" on every route, a missing one on every write. The server binds
127.0.0.1 on an ephemeral port, refuses bodies over `max_body` bytes, drops idle sockets after `socket_timeout`
seconds, answers each request on a daemon thread, and keeps everything in memory. Every request is recorded.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

DEFAULT_TOKEN = "hf_localhubTESTtoken0123456789"
DEFAULT_USER = "prb-tester"
# What the Hub writes into every new repo's first commit (trimmed to a few of its LFS rules).
INITIAL_GITATTRIBUTES = (
    b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"
    b"*.arrow filter=lfs diff=lfs merge=lfs -text\n"
    b"*.bin filter=lfs diff=lfs merge=lfs -text\n"
)
REPO_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}


def git_blob_oid(content: bytes) -> str:
    """Git's object id of a blob: what the Hub reports as a regular file's oid."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass
class Commit:
    oid: str
    parent: str | None
    message: str
    tree: dict[str, bytes]  # every file at this commit
    written: dict[str, bytes]  # files this commit added or replaced
    deleted: list[str]


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)  # name -> commit oid
    tags: dict[str, str] = field(default_factory=dict)  # name -> commit oid
    tag_messages: dict[str, str] = field(default_factory=dict)

    def resolve(self, revision: str) -> str | None:
        """Branch, tag, `refs/heads|tags/...` or full commit oid -> commit oid."""
        for prefix, refs in (("refs/heads/", self.branches), ("refs/tags/", self.tags)):
            if revision.startswith(prefix):
                return refs.get(revision[len(prefix) :])
        if revision in self.branches:
            return self.branches[revision]
        if revision in self.tags:
            return self.tags[revision]
        return revision if revision in self.commits else None

    def files(self, revision: str = "main") -> dict[str, bytes]:
        oid = self.resolve(revision)
        if oid is None:
            raise KeyError(f"{self.repo_id}: no revision {revision!r}")
        return dict(self.commits[oid].tree)


@dataclass
class Request:
    method: str
    path: str  # path and query as sent
    route: str  # which endpoint answered, "unknown" if none
    client: str  # peer address
    host: str  # Host header
    authorization: str | None
    status: int = 0


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, extra: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.extra = status, message, code, extra or {}


class LocalHub:
    """In-memory Hub; use as a context manager or call start()/stop()."""

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        user: str = DEFAULT_USER,
        max_body: int = 64 * 1024 * 1024,
        socket_timeout: float = 10.0,
    ) -> None:
        self.token, self.user, self.max_body, self.socket_timeout = token, user, max_body, socket_timeout
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[Request] = []
        self.lock = threading.RLock()
        self._counter = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> LocalHub:
        hub = self

        class Handler(_Handler):
            timeout = self.socket_timeout
            local_hub = hub

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = self._thread = None

    def __enter__(self) -> LocalHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "hub not started"
        return self._server.server_address[1]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ inspection

    def repo(self, repo_id: str, repo_type: str = "dataset") -> Repo:
        with self.lock:
            return self.repos[(repo_type, repo_id)]

    @property
    def unknown_routes(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.route == "unknown"]

    def routes(self) -> list[str]:
        with self.lock:
            return [r.route for r in self.requests]

    # ------------------------------------------------------------------ request handling

    def handle(self, method: str, raw_path: str, headers, body: bytes) -> tuple[int, dict, dict[str, str]]:
        """Answer one request: (status, JSON body, extra headers). Runs under the hub lock."""
        split = urlsplit(raw_path)
        parts = [unquote(p) for p in split.path.split("/")[1:]]
        query = parse_qs(split.query)
        auth = headers.get("authorization")
        if auth is not None and auth != f"Bearer {self.token}":
            raise HubError(401, "Invalid credentials in Authorization header")
        authed = auth is not None

        if parts[:1] != ["api"]:
            raise HubError(404, "Sorry, we can't find the page you are looking for.")
        if method == "POST" and parts[1:] == ["repos", "create"]:
            return self._create_repo(authed, _json(body))
        if method == "POST" and parts[1:] == ["validate-yaml"]:
            return self._validate_yaml(_json(body))
        if method == "GET" and parts[1:] == ["whoami-v2"]:
            if not authed:
                raise HubError(401, "Invalid username or password.")
            return 200, {"type": "user", "name": self.user, "auth": {"type": "access_token"}}, {}
        if len(parts) >= 4 and parts[1] in REPO_TYPES:
            repo_type, repo_id, rest = REPO_TYPES[parts[1]], f"{parts[2]}/{parts[3]}", parts[4:]
            repo = self.repos.get((repo_type, repo_id))
            if repo is None or (repo.private and not authed):
                raise HubError(404, "Repository not found", "RepoNotFound")
            if method == "GET" and (rest == [] or (len(rest) == 2 and rest[0] == "revision")):
                return self._info(repo, rest[1] if rest else "main")
            if method == "GET" and rest == ["refs"]:
                return self._refs(repo, "include_prs" in query)
            if method == "POST" and len(rest) == 2 and rest[0] in ("preupload", "commit", "tag"):
                if not authed:
                    raise HubError(401, "You must be authenticated to write to this repo")
                if "create_pr" in query:
                    raise HubError(400, "pull requests are not supported by the local hub")
                handler = {"preupload": self._preupload, "commit": self._commit, "tag": self._tag}[rest[0]]
                return handler(repo, rest[1], body)
        raise HubError(404, "Sorry, we can't find the page you are looking for.")

    def route_name(self, method: str, raw_path: str) -> str:
        parts = [unquote(p) for p in urlsplit(raw_path).path.split("/")[1:]]
        if parts[:3] == ["api", "repos", "create"] and method == "POST":
            return "create_repo"
        if parts[:2] == ["api", "validate-yaml"] and method == "POST":
            return "validate_yaml"
        if parts[:2] == ["api", "whoami-v2"] and method == "GET":
            return "whoami"
        if len(parts) >= 4 and parts[:1] == ["api"] and parts[1] in REPO_TYPES:
            rest = parts[4:]
            if method == "GET" and (rest == [] or (len(rest) == 2 and rest[0] == "revision")):
                return "repo_info"
            if method == "GET" and rest == ["refs"]:
                return "refs"
            if method == "POST" and len(rest) == 2 and rest[0] in ("preupload", "commit", "tag"):
                return rest[0]
        return "unknown"

    def _url(self, repo_type: str, repo_id: str) -> str:
        return f"{self.endpoint}/{URL_PREFIX[repo_type]}{repo_id}"

    def _new_oid(self, *parts: str) -> str:
        return hashlib.sha1("\0".join([str(next(self._counter)), *parts]).encode()).hexdigest()

    def _create_repo(self, authed: bool, payload: dict) -> tuple[int, dict, dict]:
        if not authed:
            raise HubError(401, "You must be authenticated to create a repo")
        repo_type = payload.get("type") or "model"
        if repo_type not in URL_PREFIX:
            raise HubError(400, f"Invalid repo type {repo_type!r}")
        name = payload.get("name")
        if not isinstance(name, str) or not name or "/" in name:
            raise HubError(400, "Invalid repo name")
        repo_id = f"{payload.get('organization') or self.user}/{name}"
        url = self._url(repo_type, repo_id)
        if (repo_type, repo_id) in self.repos:
            raise HubError(409, f"You already created this {repo_type} repo", extra={"url": url})
        repo = Repo(repo_type, repo_id, private=payload.get("visibility") == "private" or bool(payload.get("private")))
        oid = self._new_oid(repo_id, "initial commit")
        files = {".gitattributes": INITIAL_GITATTRIBUTES}
        repo.commits[oid] = Commit(oid, None, "initial commit", dict(files), dict(files), [])
        repo.branches["main"] = oid
        self.repos[(repo_type, repo_id)] = repo
        return 200, {"url": url, "name": repo_id, "id": oid[:24]}, {}

    def _validate_yaml(self, payload: dict) -> tuple[int, dict, dict]:
        content = payload.get("content")
        if not isinstance(content, str):
            raise HubError(400, "content must be a string")
        errors = []
        if content.startswith("---"):
            front, sep, _ = content[3:].partition("\n---")
            if not sep:
                errors.append("README.md metadata: the front matter is not closed with '---'")
            else:
                try:
                    meta = yaml.safe_load(front)
                except yaml.YAMLError as error:
                    errors.append(f"README.md metadata is not valid YAML: {str(error).splitlines()[0]}")
                else:
                    if meta is not None and not isinstance(meta, dict):
                        errors.append("README.md metadata must be a YAML mapping")
        if errors:
            return 400, {"errors": [{"message": message} for message in errors], "warnings": []}, {}
        return 200, {"errors": [], "warnings": []}, {}

    def _info(self, repo: Repo, revision: str) -> tuple[int, dict, dict]:
        oid = repo.resolve(revision)
        if oid is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        tree = repo.commits[oid].tree
        return (
            200,
            {
                "id": repo.repo_id,
                "author": repo.repo_id.split("/")[0],
                "sha": oid,
                "private": repo.private,
                "siblings": [{"rfilename": path} for path in sorted(tree)],
            },
            {},
        )

    def _refs(self, repo: Repo, include_prs: bool) -> tuple[int, dict, dict]:
        def refs(kind: str, items: dict[str, str]) -> list[dict]:
            return [{"name": n, "ref": f"refs/{kind}/{n}", "targetCommit": oid} for n, oid in sorted(items.items())]

        data = {"branches": refs("heads", repo.branches), "converts": [], "tags": refs("tags", repo.tags)}
        if include_prs:
            data["pullRequests"] = []
        return 200, data, {}

    def _branch_head(self, repo: Repo, revision: str) -> str:
        branch = revision.removeprefix("refs/heads/")
        if branch not in repo.branches:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return branch

    def _preupload(self, repo: Repo, revision: str, body: bytes) -> tuple[int, dict, dict]:
        head = repo.branches[self._branch_head(repo, revision)]
        payload = _json(body)
        files = payload.get("files")
        if not isinstance(files, list) or len(files) > 256:
            raise HubError(400, "files must be a list of at most 256 entries")
        tree = repo.commits[head].tree
        answer = []
        for item in files:
            path = item.get("path") if isinstance(item, dict) else None
            if not isinstance(path, str) or not isinstance(item.get("size"), int) or "sample" not in item:
                raise HubError(400, "each file needs path, size and sample")
            entry = {"path": path, "uploadMode": "regular", "shouldIgnore": False}
            if path in tree:
                entry["oid"] = git_blob_oid(tree[path])
            answer.append(entry)
        return 200, {"files": answer, "commitOid": head}, {}

    def _commit(self, repo: Repo, revision: str, body: bytes) -> tuple[int, dict, dict]:
        branch = self._branch_head(repo, revision)
        head = repo.branches[branch]
        try:
            lines = [json.loads(line) for line in body.decode("utf-8").splitlines() if line.strip()]
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise HubError(400, "commit body must be ndjson") from None
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "the first ndjson line must be the header")
        header = lines[0].get("value") or {}
        summary = header.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            raise HubError(400, "commit summary is required")
        if header.get("parentCommit") not in (None, head):
            raise HubError(412, "A commit has happened since. Please refresh and try again.")
        tree = dict(repo.commits[head].tree)
        written: dict[str, bytes] = {}
        deleted: list[str] = []
        for line in lines[1:]:
            key, value = line.get("key"), line.get("value") or {}
            path = value.get("path")
            if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
                raise HubError(400, f"bad path in commit: {path!r}")
            if key == "file":
                if value.get("encoding") != "base64":
                    raise HubError(400, "file content must be base64")
                try:
                    content = base64.b64decode(value.get("content", ""), validate=True)
                except ValueError:
                    raise HubError(400, f"{path}: content is not valid base64") from None
                tree[path] = written[path] = content
            elif key == "deletedFile":
                if tree.pop(path, None) is None:
                    raise HubError(404, f"{path}: no such file", "EntryNotFound")
                deleted.append(path)
            elif key == "deletedFolder":
                prefix = path.rstrip("/") + "/"
                for name in [name for name in tree if name.startswith(prefix)]:
                    del tree[name]
                    deleted.append(name)
            elif key == "lfsFile":
                raise HubError(400, f"{path}: LFS/Xet files are not supported here (preupload said regular)")
            else:
                raise HubError(400, f"unknown commit operation {key!r}")
        oid = self._new_oid(repo.repo_id, head, summary, *sorted(f"{p}:{git_blob_oid(c)}" for p, c in tree.items()))
        repo.commits[oid] = Commit(oid, head, summary, tree, written, deleted)
        repo.branches[branch] = oid
        url = f"{self._url(repo.repo_type, repo.repo_id)}/commit/{oid}"
        return 200, {"success": True, "commitOid": oid, "commitUrl": url, "hookOutput": ""}, {}

    def _tag(self, repo: Repo, revision: str, body: bytes) -> tuple[int, dict, dict]:
        payload = _json(body)
        tag = payload.get("tag")
        if not isinstance(tag, str) or not tag or tag.startswith("refs/") or " " in tag:
            raise HubError(400, f"invalid tag name {tag!r}")
        oid = repo.resolve(revision)
        if oid is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        if tag in repo.tags:
            raise HubError(409, f"Tag {tag} already exists")
        repo.tags[tag] = oid
        repo.tag_messages[tag] = payload.get("message") or ""
        return 200, {"name": tag, "ref": f"refs/tags/{tag}", "targetCommit": oid}, {}


def _json(body: bytes) -> dict:
    try:
        data = json.loads(body or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise HubError(400, "body must be JSON") from None
    if not isinstance(data, dict):
        raise HubError(400, "body must be a JSON object")
    return data


class _Handler(BaseHTTPRequestHandler):
    local_hub: LocalHub
    server_version = "LocalHub/1.0"

    def log_message(self, format, *args) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def _serve(self, method: str) -> None:
        hub = self.local_hub
        record = Request(
            method=method,
            path=self.path,
            route=hub.route_name(method, self.path),
            client=self.client_address[0],
            host=self.headers.get("host", ""),
            authorization=self.headers.get("authorization"),
        )
        with hub.lock:
            hub.requests.append(record)
        status, data, extra = 500, {"error": "internal error"}, {}
        try:
            if self.client_address[0] != "127.0.0.1":
                raise HubError(403, "the local hub only answers 127.0.0.1")
            if "chunked" in self.headers.get("transfer-encoding", "").lower():
                raise HubError(411, "send a Content-Length")
            length = int(self.headers.get("content-length") or 0)
            if length < 0 or length > hub.max_body:
                self.close_connection = True
                raise HubError(413, f"body over {hub.max_body} bytes")
            body = self.rfile.read(length) if length else b""
            with hub.lock:
                status, data, extra = hub.handle(method, self.path, self.headers, body)
        except HubError as error:
            status, data = error.status, {"error": error.message, **error.extra}
            extra = {"X-Error-Message": error.message}
            if error.code:
                extra["X-Error-Code"] = error.code
        except Exception as error:  # a bug in the local hub: say so (501: huggingface_hub does not retry it)
            status, data, extra = 501, {"error": f"local hub crashed: {error!r}"}, {}
        record.status = status
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(payload)
