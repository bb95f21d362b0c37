package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

// keysCmd is "linkraft keys create|list|revoke": the /admin/keys API for
// people in a terminal.
func keysCmd(args []string, stdout, stderr io.Writer) int {
	return dispatch("linkraft keys", keysUsage, map[string]subcommand{
		"create": keysCreate, "list": keysList, "revoke": keysRevoke,
	}, args, stdout, stderr)
}

// subcommand runs one command of a group such as "linkraft keys".
type subcommand func(args []string, stdout, stderr io.Writer) int

// dispatch runs the subcommand args[0] of command ("linkraft keys"),
// printing usage for help, and for no or an unknown subcommand (exit 2).
func dispatch(command, usage string, commands map[string]subcommand, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	if run, ok := commands[args[0]]; ok {
		return run(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n\n%s", command, args[0], usage)
	return 2
}

const keysUsage = `Usage:
  linkraft keys create --name NAME --scopes S[,S] [--workspaces W[,W]] [--domains D[,D]]
                      [--own-links-only] [--expires-in D | --expires-at T]
                           create an API key and print it (shown this once)
  linkraft keys list       list the keys (never their secrets)
  linkraft keys revoke ID  revoke a key: from then on no node accepts it
Scopes: links:read, links:write, stats:read, admin. Workspaces default to *
(all); --domains limits a key to links in those registered domains,
--own-links-only to the links it creates. Each takes --addr and --key (or --admin-token) like the admin commands.
`

// apiKey is a key as /admin/keys shows it.
type apiKey struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	Workspaces []string `json:"workspaces"`
	CreatedAt  string   `json:"created_at"`
	ExpiresAt  *string  `json:"expires_at"`
	CreatedBy  string   `json:"created_by"`
	Key        string   `json:"key"`
}

func keysCreate(args []string, stdout, stderr io.Writer) int {
	var o adminOpts
	fs := newFlagSet("keys create", "keys create --name NAME --scopes S[,S] [--workspaces W[,W]] [--domains D[,D]] [--own-links-only] [--expires-in D | --expires-at T] [--addr URL] [--key KEY]", stderr)
	o.register(fs, 30*time.Second)
	name := fs.String("name", "", "what the key is for")
	scopes := fs.String("scopes", "", "comma-separated: links:read, links:write, stats:read, admin")
	workspaces := fs.String("workspaces", "*", "comma-separated workspaces the key may use, or * for all")
	domains := fs.String("domains", "", "comma-separated registered domains the key is limited to (default: every domain)")
	own := fs.Bool("own-links-only", false, "the key reads, lists and changes only the links it creates")
	expiresIn := fs.Duration("expires-in", 0, "the key stops working after this long (e.g. 720h)")
	expiresAt := fs.String("expires-at", "", "the key stops working at this RFC 3339 time")
	raw := fs.Bool("json", false, "print the node's JSON answer as it is")
	pos, code := o.parse(fs, args, stderr)
	if code >= 0 {
		return code
	}
	switch {
	case len(pos) > 0:
		return usageError(fs, stderr, "unexpected arguments: %s", strings.Join(pos, " "))
	case *scopes == "":
		return usageError(fs, stderr, "--scopes is required")
	case *expiresIn != 0 && *expiresAt != "":
		return usageError(fs, stderr, "give --expires-in or --expires-at, not both")
	case *expiresIn < 0:
		return usageError(fs, stderr, "--expires-in must be positive")
	}
	req := map[string]any{"name": *name, "scopes": splitList(*scopes), "workspaces": splitList(*workspaces)}
	if *domains != "" {
		req["domains"] = splitList(*domains)
	}
	if *own {
		req["own_links_only"] = true
	}
	if *expiresIn > 0 {
		req["expires_at"] = time.Now().Add(*expiresIn).UTC().Format(time.RFC3339)
	} else if *expiresAt != "" {
		req["expires_at"] = *expiresAt
	}
	body, _ := json.Marshal(req)
	answer, code := o.call("keys create", fs, stderr, http.MethodPost, "/admin/keys", "application/json", body)
	if code >= 0 {
		return code
	}
	if *raw {
		stdout.Write(answer)
		return 0
	}
	var k apiKey
	if err := json.Unmarshal(answer, &k); err != nil {
		fmt.Fprintf(stderr, "linkraft keys create: unexpected answer: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "created key %s (%s); it is shown only now:\n", k.ID, strings.Join(k.Scopes, ","))
	fmt.Fprintln(stdout, k.Key)
	return 0
}

func keysList(args []string, stdout, stderr io.Writer) int {
	var o adminOpts
	fs := newFlagSet("keys list", "keys list [--created-by ID] [--json] [--addr URL] [--key KEY]", stderr)
	o.register(fs, 30*time.Second)
	raw := fs.Bool("json", false, "print the node's JSON answer as it is")
	createdBy := fs.String("created-by", "", "only the keys the key with this id made (after revoking a leaked key, revoke these too)")
	pos, code := o.parse(fs, args, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, stderr, "unexpected arguments: %s", strings.Join(pos, " "))
	}
	path := "/admin/keys"
	if *createdBy != "" {
		path += "?created_by=" + url.QueryEscape(*createdBy)
	}
	answer, code := o.call("keys list", fs, stderr, http.MethodGet, path, "", nil)
	if code >= 0 {
		return code
	}
	if *raw {
		stdout.Write(answer)
		return 0
	}
	var doc struct {
		Keys []apiKey `json:"keys"`
	}
	if err := json.Unmarshal(answer, &doc); err != nil {
		fmt.Fprintf(stderr, "linkraft keys list: unexpected answer: %v\n", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSCOPES\tWORKSPACES\tCREATED\tEXPIRES\tCREATED BY")
	for _, k := range doc.Keys {
		expires := "never"
		if k.ExpiresAt != nil {
			expires = *k.ExpiresAt
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, orDash(k.Name), strings.Join(k.Scopes, ","),
			strings.Join(k.Workspaces, ","), k.CreatedAt, expires, orDash(k.CreatedBy))
	}
	tw.Flush()
	return 0
}

func keysRevoke(args []string, stdout, stderr io.Writer) int {
	var o adminOpts
	fs := newFlagSet("keys revoke", "keys revoke ID [--addr URL] [--key KEY]", stderr)
	o.register(fs, 30*time.Second)
	pos, code := o.parse(fs, args, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return usageError(fs, stderr, "give the id of the key to revoke (see linkraft keys list)")
	}
	if _, code := o.call("keys revoke", fs, stderr, http.MethodDelete, "/admin/keys/"+pos[0], "", nil); code >= 0 {
		return code
	}
	fmt.Fprintf(stdout, "revoked %s\n", pos[0])
	return 0
}
