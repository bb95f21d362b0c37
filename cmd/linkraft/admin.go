package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The admin client subcommands (status, join, leave, promote, transfer,
// backup, restore) talk to a node's /admin API over HTTP or HTTPS (see
// client.go). Each exits 0 on success, 1 when the request failed (the
// node's problem+json detail is printed) and 2 on a usage error.

// adminOpts are the flags every admin subcommand shares: how to reach a
// node, and the credential to show it.
type adminOpts struct {
	connFlags
	token, key string
	// conn is the command's one client, made at its first request, so
	// that a redirect followed once holds for the command's every request.
	conn *apiClient
}

func (o *adminOpts) register(fs *flag.FlagSet, timeout time.Duration) {
	o.connFlags.register(fs, defaultAdminAddr, timeout)
	fs.StringVar(&o.key, "key", "", "an API key with the admin scope, e.g. the one in <data-dir>/admin.key (env LINKRAFT_KEY)")
	fs.StringVar(&o.token, "admin-token", "", "the nodes' --admin-token, instead of --key (env LINKRAFT_ADMIN_TOKEN)")
}

// adminEnv names the flags of adminOpts that read the environment, and
// more.
func adminEnv(more ...string) []string {
	return connEnv(append([]string{"key", "admin-token"}, more...)...)
}

// applyEnvFor sets the named flags from LINKRAFT_<NAME> when that is set.
// Only connection flags read the environment: LINKRAFT_ID on a server must
// not silently choose which server "linkraft leave" removes.
func applyEnvFor(fs *flag.FlagSet, names ...string) error {
	var errs []error
	for _, name := range names {
		env := envName(name)
		if v, ok := os.LookupEnv(env); ok {
			if err := fs.Set(name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
			}
		}
	}
	return errors.Join(errs...)
}

// parseArgs parses flags that may come before, between or after positional
// arguments, and returns the positional ones. The int is an exit code, or -1
// to go on.
func parseArgs(fs *flag.FlagSet, args []string, stderr io.Writer, envFlags ...string) ([]string, int) {
	if err := applyEnvFor(fs, envFlags...); err != nil {
		fmt.Fprintf(stderr, "linkraft %s: %v\n", fs.Name(), err)
		return nil, 2
	}
	var pos []string
	// Each round consumes at least one argument.
	for range len(args) + 1 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, 0
			}
			return nil, 2 // the flag package printed the error and the usage
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return pos, -1
}

func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: linkraft %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// usageError reports a usage error and returns exit code 2.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, a ...any) int {
	fmt.Fprintf(stderr, "linkraft %s: %s\n", fs.Name(), fmt.Sprintf(format, a...))
	fs.Usage()
	return 2
}

// parse parses a subcommand's arguments. Only the connection flags read
// the environment: a LINKRAFT_ID meant for serve must not pick the server
// that leave removes.
func (o *adminOpts) parse(fs *flag.FlagSet, args []string, stderr io.Writer) ([]string, int) {
	return parseArgs(fs, args, stderr, adminEnv()...)
}

// call makes one admin request. It returns the answer's body and -1, or the
// exit code after reporting the error.
func (o *adminOpts) call(cmd string, fs *flag.FlagSet, stderr io.Writer, method, path, contentType string, body []byte) ([]byte, int) {
	c, err := o.client(cmd, stderr)
	if err != nil {
		return nil, usageError(fs, stderr, "%v", err)
	}
	answer, err := c.do(method, path, contentType, body)
	if err != nil {
		return nil, fail(cmd, stderr, err)
	}
	return answer, -1
}

// client is the command's client, made at the first call.
func (o *adminOpts) client(cmd string, stderr io.Writer) (*apiClient, error) {
	if o.conn != nil {
		return o.conn, nil
	}
	credential := o.key
	if credential == "" {
		credential = o.token
	}
	c, err := o.connFlags.client(cmd, credential, stderr)
	if err != nil {
		return nil, err
	}
	o.conn = c
	return c, nil
}

// problemDetail is the detail of a problem+json body, or the body itself
// (shortened) when it is something else.
func problemDetail(status int, body []byte) string {
	var p struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
		Error  string `json:"error"`
	}
	if json.Unmarshal(body, &p) == nil {
		for _, s := range []string{p.Detail, p.Error, p.Title} {
			if s != "" {
				return s
			}
		}
	}
	text := strings.Join(strings.Fields(string(body)), " ")
	if text == "" {
		if text = http.StatusText(status); text == "" {
			text = "(no detail)"
		}
	}
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	return text
}

// fail prints err as "linkraft <cmd>: <message>" and returns exit code 1.
func fail(cmd string, stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "linkraft %s: %v\n", cmd, err)
	var ae *adminError
	if errors.As(err, &ae) && ae.hint != "" {
		fmt.Fprintf(stderr, "hint: %s\n", ae.hint)
	}
	return 1
}

// clusterDoc is GET /admin/cluster's answer, decoded tolerantly.
type clusterDoc struct {
	NodeID         string          `json:"node_id"`
	Role           string          `json:"role"`
	Leader         string          `json:"leader"`
	LeaderRaftAddr string          `json:"leader_raft_addr"`
	Term           uint64          `json:"term"`
	CommitIndex    uint64          `json:"commit_index"`
	AppliedIndex   uint64          `json:"applied_index"`
	HTTPAddr       string          `json:"http_addr"`
	Servers        []clusterServer `json:"servers"`
}

type clusterServer struct {
	ID          string `json:"id"`
	RaftAddr    string `json:"raft_addr"`
	HTTPAddr    string `json:"http_addr"`
	Suffrage    string `json:"suffrage"`
	Leader      bool   `json:"leader"`
	Reachable   bool   `json:"reachable"`
	LastContact string `json:"last_contact"`
	// AppliedIndex and ReplicationLag are absent for a server that did not
	// answer; CatchingUp marks a learner the leader has yet to promote.
	AppliedIndex   *uint64 `json:"applied_index"`
	ReplicationLag *uint64 `json:"replication_lag"`
	CatchingUp     bool    `json:"catching_up"`
}

// printCluster writes doc as a readable summary and server table.
func printCluster(w io.Writer, doc *clusterDoc, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	node := orDash(doc.NodeID)
	if doc.Role != "" {
		node += " (" + doc.Role + ")"
	}
	if doc.HTTPAddr != "" {
		node += " http " + doc.HTTPAddr
	}
	fmt.Fprintf(tw, "answered by:\t%s\n", node)
	leader := "none known (no quorum, or an election is under way)"
	if doc.Leader != "" || doc.LeaderRaftAddr != "" {
		leader = orDash(doc.Leader)
		if doc.LeaderRaftAddr != "" {
			leader += " at " + doc.LeaderRaftAddr
		}
	}
	fmt.Fprintf(tw, "leader:\t%s\n", leader)
	fmt.Fprintf(tw, "term:\t%d\n", doc.Term)
	fmt.Fprintf(tw, "commit index:\t%d\n", doc.CommitIndex)
	fmt.Fprintf(tw, "applied index:\t%d\n", doc.AppliedIndex)
	tw.Flush()

	fmt.Fprintln(w)
	if len(doc.Servers) == 0 {
		fmt.Fprintln(w, "no servers in the configuration")
		return
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRAFT ADDR\tHTTP ADDR\tSUFFRAGE\tLEADER\tREACHABLE\tAPPLIED\tLAG\tLAST CONTACT")
	unknown := false
	for _, s := range doc.Servers {
		httpAddr := s.HTTPAddr
		if httpAddr == "" && s.ID == doc.NodeID {
			httpAddr = doc.HTTPAddr
		}
		mark := ""
		if s.Leader || (s.ID != "" && s.ID == doc.Leader) {
			mark = "*"
		}
		reach := "no"
		switch {
		case s.Reachable:
			reach = "yes"
		case doc.Role != "leader" && s.ID != doc.NodeID && mark == "" && s.LastContact == "":
			// Only the leader knows its followers' reachability.
			reach, unknown = "?", true
		}
		suffrage := strings.ToLower(s.Suffrage)
		if s.CatchingUp {
			suffrage = "learner" // a non-voter the leader promotes once it has caught up
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orDash(s.ID), orDash(s.RaftAddr), orDash(httpAddr),
			orDash(suffrage), orDash(mark), reach, index(s.AppliedIndex), index(s.ReplicationLag), lastContact(s.LastContact, now))
	}
	tw.Flush()
	if unknown {
		fmt.Fprintln(w, "\n? = not known to this node; ask the leader for every server's reachability")
	}
}

// index shows an index or a count that may be absent.
func index(v *uint64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatUint(*v, 10)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// lastContact shows an RFC 3339 time as an age ("1.5s ago").
func lastContact(ts string, now time.Time) string {
	if ts == "" {
		return "-"
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return d.Round(100*time.Millisecond).String() + " ago"
	default:
		return d.Round(time.Second).String() + " ago"
	}
}

// printClusterAnswer prints a cluster document as a table, or raw with
// --json.
func printClusterAnswer(cmd string, stdout, stderr io.Writer, body []byte, raw bool) int {
	if raw {
		stdout.Write(body)
		if !bytes.HasSuffix(body, []byte("\n")) {
			fmt.Fprintln(stdout)
		}
		return 0
	}
	var doc clusterDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return fail(cmd, stderr, fmt.Errorf("the node's answer is not a cluster document: %v", err))
	}
	printCluster(stdout, &doc, time.Now())
	return 0
}

// adminStatus is "linkraft status".
func adminStatus(args []string, stdout, stderr io.Writer) int {
	return clusterCommand(args, stdout, stderr, clusterCall{
		name: "status", usage: "status [--addr URL] [--key KEY] [--json]", timeout: 10 * time.Second,
		method: http.MethodGet, path: "/admin/cluster",
	})
}

// clusterCall is a command without arguments that makes one call whose
// answer is the cluster's view, printed as status prints it.
type clusterCall struct {
	name, usage  string
	timeout      time.Duration
	method, path string
	done         string // said before the view, unless --json
}

func clusterCommand(args []string, stdout, stderr io.Writer, c clusterCall) int {
	var o adminOpts
	fs := newFlagSet(c.name, c.usage, stderr)
	o.register(fs, c.timeout)
	raw := fs.Bool("json", false, "print the node's JSON answer as it is")
	pos, code := o.parse(fs, args, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, stderr, "unexpected arguments: %s", strings.Join(pos, " "))
	}
	body, code := o.call(c.name, fs, stderr, c.method, c.path, "", nil)
	if code >= 0 {
		return code
	}
	if c.done != "" && !*raw {
		fmt.Fprint(stdout, c.done+"\n\n")
	}
	return printClusterAnswer(c.name, stdout, stderr, body, *raw)
}

// adminJoin is "linkraft join".
func adminJoin(args []string, stdout, stderr io.Writer) int {
	var o adminOpts
	fs := newFlagSet("join", "join --id ID --raft-addr HOST:PORT [--http-addr HOST:PORT] [--non-voter] [--addr URL] [--key KEY]", stderr)
	o.register(fs, 30*time.Second)
	id := fs.String("id", "", "id of the server to add (its --id)")
	raftAddr := fs.String("raft-addr", "", "Raft address the cluster reaches the server at")
	httpAddr := fs.String("http-addr", "", "HTTP address of the server (optional)")
	nonVoter := fs.Bool("non-voter", false, "add it as a non-voter (a read replica), which never counts towards the quorum")
	raw := fs.Bool("json", false, "print the node's JSON answer as it is")
	pos, code := o.parse(fs, args, stderr)
	if code >= 0 {
		return code
	}
	switch {
	case len(pos) > 0:
		return usageError(fs, stderr, "unexpected arguments: %s", strings.Join(pos, " "))
	case *id == "":
		return usageError(fs, stderr, "--id is required")
	case *raftAddr == "":
		return usageError(fs, stderr, "--raft-addr is required")
	}
	fields := map[string]any{"id": *id, "raft_addr": *raftAddr, "http_addr": *httpAddr}
	if *nonVoter {
		fields["non_voter"] = true
	}
	req, _ := json.Marshal(fields)
	body, code := o.call("join", fs, stderr, http.MethodPost, "/admin/join", "application/json", req)
	if code >= 0 {
		return code
	}
	if !*raw {
		fmt.Fprintf(stdout, "joined %s (raft %s)\n\n", *id, *raftAddr)
	}
	return printClusterAnswer("join", stdout, stderr, body, *raw)
}

// adminLeave is "linkraft leave".
func adminLeave(args []string, stdout, stderr io.Writer) int {
	return adminServerChange(args, stdout, stderr, "leave", "/admin/leave", "id of the server to remove", "removed", afterRemoval)
}

// afterRemoval tells the operator what follows a removal: the server
// stops taking part on its own but still runs, and the cluster keeps it
// out for good on the data dir it was removed with.
func afterRemoval(id string) string {
	return fmt.Sprintf("%[1]s takes no further part in the cluster: its /health answers 503 \"removed\". Stop it "+
		"(under systemd: systemctl disable --now linkraft on its host).\n"+
		"To bring %[1]s back: empty its data dir, start it again, then add it with\n"+
		"  linkraft join --id %[1]s --raft-addr HOST:PORT --http-addr HOST:PORT\n", id)
}

// adminPromote is "linkraft promote": a non-voter (read replica) becomes
// a voter.
func adminPromote(args []string, stdout, stderr io.Writer) int {
	return adminServerChange(args, stdout, stderr, "promote", "/admin/promote", "id of the non-voter to make a voter", "promoted", nil)
}

// adminServerChange posts {"id"} to path and prints the cluster after it,
// with next's advice (when given) between.
func adminServerChange(args []string, stdout, stderr io.Writer, name, path, idUsage, done string, next func(id string) string) int {
	var o adminOpts
	fs := newFlagSet(name, name+" --id ID [--addr URL] [--key KEY]", stderr)
	o.register(fs, 30*time.Second)
	id := fs.String("id", "", idUsage)
	raw := fs.Bool("json", false, "print the node's JSON answer as it is")
	pos, code := o.parse(fs, args, stderr)
	if code >= 0 {
		return code
	}
	switch {
	case len(pos) > 0:
		return usageError(fs, stderr, "unexpected arguments: %s", strings.Join(pos, " "))
	case *id == "":
		return usageError(fs, stderr, "--id is required")
	}
	req, _ := json.Marshal(map[string]string{"id": *id})
	body, code := o.call(name, fs, stderr, http.MethodPost, path, "application/json", req)
	if code >= 0 {
		return code
	}
	if !*raw {
		fmt.Fprintf(stdout, "%s %s\n", done, *id)
		if next != nil {
			fmt.Fprint(stdout, next(*id))
		}
		fmt.Fprintln(stdout)
	}
	return printClusterAnswer(name, stdout, stderr, body, *raw)
}

// adminTransfer is "linkraft transfer": the leader hands leadership to
// the most up-to-date other voter, before it is restarted or upgraded.
func adminTransfer(args []string, stdout, stderr io.Writer) int {
	return clusterCommand(args, stdout, stderr, clusterCall{
		name: "transfer", timeout: 30 * time.Second, method: http.MethodPost, path: "/admin/leadership-transfer",
		usage: "transfer [--addr URL] [--key KEY] [--json]\n\n" +
			"The leader hands leadership to the most up-to-date other voter; any node passes the request on to the\n" +
			"leader. It fails (409) when there is no other voter.",
		done: "leadership transferred",
	})
}

// adminBackup is "linkraft backup".
func adminBackup(args []string, stdout, stderr io.Writer) int {
	var o adminOpts
	fs := newFlagSet("backup", "backup [-o FILE | --to DIR|s3://bucket/prefix] [--addr URL] [--key KEY]\n\n"+
		"Writes the whole state, authenticated with the cluster key: the cluster restores it (linkraft restore) only\n"+
		"unchanged, and another cluster only with --foreign. Keep backups as safe as the links and keys they hold.\n"+
		"--to stores it compressed, named as scheduled backups (serve --backup-to) are; s3:// takes its credentials\n"+
		"from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or the shared credentials file.", stderr)
	o.register(fs, 5*time.Minute)
	var out, to string
	var s3 s3Flags
	fs.StringVar(&out, "o", "", "write the backup to FILE (default: standard output)")
	fs.StringVar(&out, "output", "", "same as -o")
	fs.StringVar(&to, "to", "", "store the backup, compressed, in a directory or under s3://bucket/prefix")
	s3Defs := s3.flagDefs()
	registerFlags(fs, s3Defs)
	pos, code := parseArgs(fs, args, stderr, adminEnv(flagNames(s3Defs)...)...)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, stderr, "unexpected arguments: %s (use -o FILE)", strings.Join(pos, " "))
	}
	if to != "" {
		if out != "" {
			return usageError(fs, stderr, "-o and --to: choose one")
		}
		return backupTo(&o, fs, &s3, to, stderr)
	}
	if out == "" || out == "-" {
		if f, ok := stdout.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				return usageError(fs, stderr, "refusing to write a binary backup to a terminal: use -o FILE or redirect the output")
			}
		}
	}
	body, code := o.call("backup", fs, stderr, http.MethodGet, "/admin/backup", "", nil)
	if code >= 0 {
		return code
	}
	if len(body) == 0 {
		return fail("backup", stderr, errors.New("the node sent an empty backup"))
	}
	if out == "" || out == "-" {
		if _, err := stdout.Write(body); err != nil {
			return fail("backup", stderr, err)
		}
		return 0
	}
	if err := writeFileAtomic(out, body); err != nil {
		return fail("backup", stderr, err)
	}
	fmt.Fprintf(stderr, "wrote %d bytes to %s\n", len(body), out)
	return 0
}

// writeFileAtomic writes data to path.tmp, syncs it and renames it over
// path, so path is either the old file or the complete new one.
func writeFileAtomic(path string, data []byte) (err error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// adminRestore is "linkraft restore".
func adminRestore(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var o adminOpts
	fs := newFlagSet("restore", "restore FILE|- | --from SOURCE [--foreign] [--addr URL] [--key KEY]\n\n"+
		"Makes the whole cluster take the state in a backup (linkraft backup). The cluster takes only a backup made\n"+
		"under its own cluster key and unchanged since; every record must pass the rules a client's write passes.\n"+
		"The key that restores stays valid, and the audit log records the restore. --from takes a file, a directory's\n"+
		"newest backup, or an s3:// object or prefix's newest; a backup that fails its checksum or is refused is\n"+
		"reported with why, and the next older one is tried.", stderr)
	o.register(fs, 5*time.Minute)
	var from string
	var s3 s3Flags
	fs.StringVar(&from, "from", "", "restore the newest good backup of a file, a directory, or an s3://bucket/object or s3://bucket/prefix/")
	s3Defs := s3.flagDefs()
	registerFlags(fs, s3Defs)
	foreign := fs.Bool("foreign", false, "restore a backup this cluster cannot authenticate: one made by another cluster (another "+
		"--cluster-key), by a node without a cluster key, or by a build before backups were authenticated. Only for a backup "+
		"whose source you trust: without the flag the cluster takes only its own backups, unchanged since they were made. "+
		"Every record is checked either way, and the audit log records the restore")
	pos, code := parseArgs(fs, args, stderr, adminEnv(flagNames(s3Defs)...)...)
	if code >= 0 {
		return code
	}
	path := "/admin/restore"
	if *foreign {
		path += "?foreign=true"
	}
	if from != "" {
		if len(pos) != 0 {
			return usageError(fs, stderr, "--from and a backup file: choose one")
		}
		return restoreFrom(&o, fs, &s3, from, path, stdout, stderr)
	}
	if len(pos) != 1 {
		return usageError(fs, stderr, "want exactly one backup file (or - for standard input), or --from SOURCE")
	}
	var data []byte
	var err error
	if pos[0] == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(pos[0])
	}
	if err != nil {
		return fail("restore", stderr, fmt.Errorf("read backup: %w", err))
	}
	if len(data) == 0 {
		return fail("restore", stderr, fmt.Errorf("backup %s is empty", pos[0]))
	}
	body, code := o.call("restore", fs, stderr, http.MethodPost, path, "application/octet-stream", data)
	if code >= 0 {
		return code
	}
	stdout.Write(body)
	if !bytes.HasSuffix(body, []byte("\n")) {
		fmt.Fprintln(stdout)
	}
	return 0
}
