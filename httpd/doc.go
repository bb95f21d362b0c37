// Package httpd turns linkraft's public HTTP API into calls on the cluster
// node (writes) and the FSM (reads), and their answers back into HTTP: JSON
// bodies, problem+json errors, HTML error pages for browsers, redirects.
//
// The redirect path is the hot one and bypasses the router: a map lookup,
// two header writes and a click increment, without allocating.
package httpd
