package httpd

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// adminAPI serves the cluster's administration: membership, leadership,
// backup and restore.
type adminAPI struct {
	fsm     *fsm.FSM
	admin   Admin
	members Members
	log     *slog.Logger
}

func (api *adminAPI) register(rt routing) {
	rt.adminRead("GET", "/admin/cluster", "admin_cluster", api.handleCluster)
	rt.admin("POST", "/admin/join", "admin_join", api.handleJoin)
	rt.admin("POST", "/admin/leave", "admin_leave", api.handleLeave)
	rt.admin("POST", "/admin/promote", "admin_promote", api.handlePromote)
	rt.admin("POST", "/admin/leadership-transfer", "admin_leadership_transfer", api.handleLeadershipTransfer)
	rt.adminRead("GET", "/admin/backup", "admin_backup", api.handleBackup)
	// A restore records itself in the audit log, which older builds do
	// not read: an older leader, which would not authenticate the
	// backup either, is never sent one.
	restore := rt.forwarder(api.handleRestore, forwardAdmin.needs(fsm.LevelRestoreAudit))
	rt.handle("POST", "/admin/restore", "admin_restore", rt.require(fsm.ScopeAdmin, restore))
}

func (api *adminAPI) handleCluster(ctx *fasthttp.RequestCtx) {
	st, err := api.admin.Status()
	if err != nil {
		writeProblem(ctx, fasthttp.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, st)
}

// handleBackup answers a backup; ?compressed=true the compressed format
// that scheduled backups use (linkraft backup --to writes it).
func (api *adminAPI) handleBackup(ctx *fasthttp.RequestCtx) {
	write := api.admin.Backup
	switch v := string(ctx.QueryArgs().Peek("compressed")); v {
	case "", "false":
	case "true":
		write = api.admin.BackupCompressed
	default:
		writeProblem(ctx, fasthttp.StatusBadRequest, "compressed must be true or false, not "+strconv.Quote(v))
		return
	}
	if answerSpooled(ctx, api.admin, api.log, "backup", write) {
		ctx.SetContentType("application/octet-stream")
		ctx.Response.Header.Set(fasthttp.HeaderContentDisposition, `attachment; filename="linkraft.backup"`)
	}
}

// answerSpooled answers with what write writes, spooled to a file first
// (cluster's Spool says why) and sent from it with its length. false: the
// answer is a 500, and what failed is logged.
func answerSpooled(ctx *fasthttp.RequestCtx, admin Admin, log *slog.Logger, what string, write func(io.Writer) error) bool {
	f, size, err := admin.Spool(write)
	if err != nil {
		log.Error(what+" failed", "err", err)
		writeProblem(ctx, fasthttp.StatusInternalServerError, what+" failed")
		return false
	}
	ctx.SetBodyStream(f, int(size)) // fasthttp closes f once it is sent
	return true
}

// handleRestore installs a backup. ?foreign=true restores one this
// cluster cannot authenticate (cluster.RestoreOptions); the key performing
// the restore stays valid and is recorded in the audit log.
func (api *adminAPI) handleRestore(ctx *fasthttp.RequestCtx) {
	var foreign bool
	switch v := string(ctx.QueryArgs().Peek("foreign")); v {
	case "", "false":
	case "true":
		foreign = true
	default:
		writeProblem(ctx, fasthttp.StatusBadRequest, "foreign must be true or false, not "+strconv.Quote(v))
		return
	}
	body := ctx.PostBody()
	if len(body) == 0 {
		writeProblem(ctx, fasthttp.StatusBadRequest, "send a backup (from GET /admin/backup) as the request body")
		return
	}
	if err := api.admin.Restore(body, cluster.RestoreOptions{Foreign: foreign, By: keyID(ctx)}); err != nil {
		writeError(ctx, api.log, err, errorDetail{fsm.ErrCorruptSnapshot, "not a valid linkraft backup: " + err.Error()})
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"restored": true, "links": api.fsm.Len()})
}

// decodeAdminBody reads a JSON admin request body into v.
func decodeAdminBody(ctx *fasthttp.RequestCtx, v any) bool {
	if err := json.Unmarshal(ctx.PostBody(), v); err != nil {
		writeProblem(ctx, fasthttp.StatusBadRequest, "body must be a JSON object: "+err.Error())
		return false
	}
	return true
}

func (api *adminAPI) handleJoin(ctx *fasthttp.RequestCtx) {
	var req struct {
		ID       string `json:"id"`
		RaftAddr string `json:"raft_addr"`
		HTTPAddr string `json:"http_addr"`
		NonVoter bool   `json:"non_voter"` // a read replica: never counts towards the quorum
	}
	if !decodeAdminBody(ctx, &req) {
		return
	}
	if err := api.members.AddServer(req.ID, req.RaftAddr, req.HTTPAddr, req.NonVoter, keyID(ctx)); err != nil {
		writeError(ctx, api.log, err)
		return
	}
	api.handleCluster(ctx)
}

func (api *adminAPI) handleLeave(ctx *fasthttp.RequestCtx) {
	var req struct {
		ID string `json:"id"`
	}
	if !decodeAdminBody(ctx, &req) {
		return
	}
	if err := api.members.RemoveServer(req.ID, keyID(ctx)); err != nil {
		writeError(ctx, api.log, err)
		return
	}
	api.handleCluster(ctx)
}

// handlePromote makes a non-voter (a read replica) a voter.
func (api *adminAPI) handlePromote(ctx *fasthttp.RequestCtx) {
	var req struct {
		ID string `json:"id"`
	}
	if !decodeAdminBody(ctx, &req) {
		return
	}
	if err := api.members.Promote(req.ID, keyID(ctx)); err != nil {
		writeError(ctx, api.log, err)
		return
	}
	api.handleCluster(ctx)
}

func (api *adminAPI) handleLeadershipTransfer(ctx *fasthttp.RequestCtx) {
	if err := api.members.TransferLeadership(); err != nil {
		writeError(ctx, api.log, err)
		return
	}
	api.handleCluster(ctx)
}

// pprofPrefix is where the runtime profiles are served.
const pprofPrefix = "/debug/pprof/"

// pprofHandler serves the Go runtime's profiles (net/http/pprof) under
// pprofPrefix: the index, cmdline, profile, symbol, trace and every named
// profile (heap, goroutine, allocs, ...). Profiles are this node's own and
// are never forwarded; the route is guarded like the admin API, since they
// reveal the process's internals and a CPU profile or trace costs CPU.
func pprofHandler() fasthttp.RequestHandler {
	mux := http.NewServeMux()
	mux.HandleFunc(pprofPrefix, pprof.Index) // and the named profiles
	mux.HandleFunc(pprofPrefix+"cmdline", redactedCmdline)
	mux.HandleFunc(pprofPrefix+"profile", pprof.Profile)
	mux.HandleFunc(pprofPrefix+"symbol", pprof.Symbol)
	mux.HandleFunc(pprofPrefix+"trace", pprof.Trace)
	return fasthttpadaptor.NewFastHTTPHandler(mux)
}

// secretFlag reports the flags whose values /debug/pprof/cmdline never
// shows: an admin key must not turn into the cluster key (membership) or
// the root token (which no revocation stops).
func secretFlag(name string) bool { return name == "cluster-key" || name == "admin-token" }

// redactedCmdline is pprof's cmdline answer (arguments separated by NUL)
// with the values of secret flags replaced, in both the "--flag value" and
// the "--flag=value" forms, with one dash or two.
func redactedCmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, strings.Join(redactArgs(os.Args), "\x00"))
}

func redactArgs(args []string) []string {
	out := make([]string, len(args))
	redactNext := false
	for i, a := range args {
		out[i] = a
		if redactNext {
			out[i], redactNext = "REDACTED", false
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !secretFlag(name) {
			continue
		}
		if hasValue {
			out[i] = a[:strings.Index(a, "=")+1] + "REDACTED"
		} else {
			redactNext = true
		}
	}
	return out
}
