// Package httpd turns linkraft's public HTTP API (docs/API.md) into calls on
// the cluster node and the FSM, and their answers back into HTTP: JSON
// bodies, problem+json errors, HTML error pages for browsers, redirects. It
// mounts the cluster's node-to-node handler but never talks to another node
// itself: forwarding and read-after-write are cluster.Node's, which
// httpd reaches through the small interfaces of node.go.
//
// Server wires the parts, routes, and keeps the middleware (credentials,
// limits, forwarding). The redirect path is one type, redirector, and the
// hot one: it bypasses the router, a map lookup, two header writes and a
// click increment, without allocating. The rest of the API is handler
// groups (apis.go), each holding only the parts of the node it calls.
// DESIGN.md lists the layout, the routes, the error mapping and the hot
// path.
package httpd
