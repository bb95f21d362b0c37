// Package kubernetes holds no code: its test checks the manifests in this
// folder. It is a module of its own so that the Kubernetes API types stay
// out of linkraft's go.mod.
package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomize's Kustomization these files use;
// decoded strictly like the rest, so a misspelt key fails here too.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// example is the Secret's shape, kept out of kustomization.yaml.
const example = "secret.example.yaml"

// manifests is every object of the folder, decoded strictly.
type manifests struct {
	sts      *appsv1.StatefulSet
	services map[string]*corev1.Service
	pdb      *policyv1.PodDisruptionBudget
	secret   *corev1.Secret
}

// decodeStrict decodes one YAML document into out as the API server's
// strict field validation does: YAML to JSON refusing duplicate keys, then
// sigs.k8s.io/json refusing unknown and duplicate fields, case-sensitively.
// (encoding/json, behind yaml.UnmarshalStrict, matches names ignoring case
// and so accepts "readOnlyRootFileSystem".) A misspelt field is an error,
// not a field Kubernetes would drop or refuse at apply time.
func decodeStrict(doc []byte, out any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, out, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// documents splits a YAML file into its non-empty documents.
func documents(b []byte) [][]byte {
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

func stripComments(s string) string {
	return regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(s, "")
}

func load(t *testing.T) manifests {
	t.Helper()
	raw, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := decodeStrict(raw, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml: apiVersion/kind %q/%q", k.APIVersion, k.Kind)
	}

	// Every YAML file here is either a resource of the kustomization or the
	// Secret's example: none is forgotten, none listed is missing.
	files, _ := filepath.Glob("*.yaml")
	for _, f := range files {
		if f != "kustomization.yaml" && f != example && !slices.Contains(k.Resources, f) {
			t.Errorf("%s is not listed in kustomization.yaml", f)
		}
	}
	if slices.Contains(k.Resources, example) {
		t.Errorf("%s must not be a resource: applying it would empty the real Secret", example)
	}

	m := manifests{services: map[string]*corev1.Service{}}
	for _, f := range append(slices.Clone(k.Resources), example) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range documents(b) {
			if err := m.add(doc); err != nil {
				t.Errorf("%s, document %d: %v", f, i+1, err)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if m.sts == nil || m.pdb == nil || m.secret == nil || len(m.services) != 2 {
		t.Fatalf("want one StatefulSet, two Services, one PodDisruptionBudget and the Secret; have %d Services", len(m.services))
	}
	return m
}

// add decodes doc into the API type its apiVersion and kind name.
func (m *manifests) add(doc []byte) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return err
	}
	var obj interface {
		GetName() string
		GetNamespace() string
	}
	switch meta.APIVersion + " " + meta.Kind {
	case "apps/v1 StatefulSet":
		m.sts = &appsv1.StatefulSet{}
		obj = m.sts
	case "v1 Service":
		s := &corev1.Service{}
		obj = s
		defer func() { m.services[s.Name] = s }()
	case "policy/v1 PodDisruptionBudget":
		m.pdb = &policyv1.PodDisruptionBudget{}
		obj = m.pdb
	case "v1 Secret":
		m.secret = &corev1.Secret{}
		obj = m.secret
	default:
		return fmt.Errorf("unexpected %s %s", meta.APIVersion, meta.Kind)
	}
	if err := decodeStrict(doc, obj); err != nil {
		return err
	}
	if obj.GetName() == "" {
		return fmt.Errorf("%s without a name", meta.Kind)
	}
	// kustomize (or kubectl -n) sets the namespace.
	if ns := obj.GetNamespace(); ns != "" {
		return fmt.Errorf("%s %s: hard-coded namespace %q", meta.Kind, obj.GetName(), ns)
	}
	return nil
}

// selects reports whether every pair of selector is among labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (m manifests) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := m.sts.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("want one container, have %d", len(cs))
	}
	return cs[0]
}

func env(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// containerPort resolves a Service targetPort or probe port (a name or a
// number) to the container's port, or fails.
func containerPort(c corev1.Container, p intstr.IntOrString, proto corev1.Protocol) (int32, error) {
	for _, cp := range c.Ports {
		if cp.Protocol == "" {
			cp.Protocol = corev1.ProtocolTCP
		}
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if cp.Protocol != proto {
			continue
		}
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("no %s container port %s", proto, p.String())
}

// addrPort is the port of a listen address such as ":8080" or "0.0.0.0:8081".
func addrPort(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return int32(n)
}

func TestStatefulSet(t *testing.T) {
	m := load(t)
	spec := m.sts.Spec
	pod := spec.Template
	if spec.Replicas == nil || *spec.Replicas != 3 {
		t.Errorf("replicas: want 3")
	}
	if spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q: want Parallel", spec.PodManagementPolicy)
	}
	if spec.Selector == nil || !selects(spec.Selector.MatchLabels, pod.Labels) {
		t.Errorf("the StatefulSet's selector %v does not select its pods %v", spec.Selector, pod.Labels)
	}

	// The governing Service is the headless one, and it publishes pods
	// before they are ready so the first three find each other.
	peers, ok := m.services[spec.ServiceName]
	if !ok {
		t.Fatalf("serviceName %q names no Service here", spec.ServiceName)
	}
	if peers.Spec.ClusterIP != corev1.ClusterIPNone || !peers.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: want clusterIP None and publishNotReadyAddresses", peers.Name)
	}

	c := m.container(t)
	e := func(name string) string {
		v, ok := env(c, name)
		if !ok || v.Value == "" {
			t.Errorf("%s: not set", name)
		}
		return v.Value
	}
	httpPort := addrPort(t, e("LINKRAFT_HTTP_ADDR"))
	raftPort := addrPort(t, e("LINKRAFT_RAFT_ADDR"))
	gossipPort := addrPort(t, e("LINKRAFT_GOSSIP_ADDR"))
	for _, p := range []struct {
		name  string
		port  int32
		proto corev1.Protocol
	}{{"http", httpPort, "TCP"}, {"raft", raftPort, "TCP"}, {"gossip", gossipPort, "TCP"}, {"gossip-udp", gossipPort, "UDP"}} {
		if got, err := containerPort(c, intstr.FromString(p.name), p.proto); err != nil || got != p.port {
			t.Errorf("container port %s: %d, %v; the node listens on %d", p.name, got, err, p.port)
		}
	}

	if got := e("LINKRAFT_BOOTSTRAP_EXPECT"); got != strconv.Itoa(int(*spec.Replicas)) {
		t.Errorf("LINKRAFT_BOOTSTRAP_EXPECT=%s, replicas %d", got, *spec.Replicas)
	}
	// The seeds are the first pods' names under the headless Service.
	var seeds []string
	for i := range int(*spec.Replicas) {
		seeds = append(seeds, fmt.Sprintf("%s-%d.%s:%d", m.sts.Name, i, spec.ServiceName, gossipPort))
	}
	if got := e("LINKRAFT_JOIN"); got != strings.Join(seeds, ",") {
		t.Errorf("LINKRAFT_JOIN=%s: want %s", got, strings.Join(seeds, ","))
	}
	if v, _ := env(c, "LINKRAFT_ID"); v.ValueFrom == nil || v.ValueFrom.FieldRef == nil || v.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("LINKRAFT_ID: want the pod name (fieldRef metadata.name)")
	}
	if v, _ := env(c, "LINKRAFT_ADVERTISE"); v.ValueFrom == nil || v.ValueFrom.FieldRef == nil || v.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("LINKRAFT_ADVERTISE: want the pod IP (fieldRef status.podIP)")
	}
	if got := e("LINKRAFT_LEAVE_ON_TERMINATE"); got != "false" {
		t.Errorf("LINKRAFT_LEAVE_ON_TERMINATE=%s: a rolling restart would shrink the cluster", got)
	}

	// Probes ask the port the node serves HTTP on: readiness /health (can
	// serve this cluster's links), startup and liveness /health/live (the
	// process runs), so a node waiting for its peers is never restarted.
	probes := map[string]struct {
		p    *corev1.Probe
		path string
	}{
		"startup": {c.StartupProbe, "/health/live"}, "readiness": {c.ReadinessProbe, "/health"}, "liveness": {c.LivenessProbe, "/health/live"},
	}
	for name, pp := range probes {
		p := pp.p
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s probe: want an httpGet", name)
			continue
		}
		if p.HTTPGet.Path != pp.path {
			t.Errorf("%s probe path %q: want %s", name, p.HTTPGet.Path, pp.path)
		}
		if got, err := containerPort(c, p.HTTPGet.Port, "TCP"); err != nil || got != httpPort {
			t.Errorf("%s probe port %s: %d, %v; HTTP is on %d", name, p.HTTPGet.Port.String(), got, err, httpPort)
		}
	}

	// The data dir is the volume from the claim template.
	dataDir := e("LINKRAFT_DATA_DIR")
	if !slices.ContainsFunc(c.VolumeMounts, func(v corev1.VolumeMount) bool { return v.MountPath == dataDir }) {
		t.Errorf("nothing is mounted at LINKRAFT_DATA_DIR=%s", dataDir)
	}
	for _, v := range c.VolumeMounts {
		if !slices.ContainsFunc(spec.VolumeClaimTemplates, func(p corev1.PersistentVolumeClaim) bool { return p.Name == v.Name }) {
			t.Errorf("volume mount %s names no volumeClaimTemplate", v.Name)
		}
	}

	// The node needs at most its drain + 2 x write timeout + 5 s (20 s by
	// default) to stop.
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g <= 20 {
		t.Errorf("terminationGracePeriodSeconds must exceed the node's 20 s stop")
	}
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		t.Errorf("enableServiceLinks: want false (it adds LINKRAFT_* variables)")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("want CPU and memory requests")
	}

	psc, sc := pod.Spec.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatal("want pod and container securityContext")
	}
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext: want runAsNonRoot and seccomp RuntimeDefault")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext: want readOnlyRootFilesystem, no privilege escalation, drop ALL")
	}
}

func TestServicesAndPDBSelectPods(t *testing.T) {
	m := load(t)
	labels := m.sts.Spec.Template.Labels
	c := m.container(t)
	for name, s := range m.services {
		if !selects(s.Spec.Selector, labels) {
			t.Errorf("Service %s: selector %v does not select the pods %v", name, s.Spec.Selector, labels)
		}
		for _, p := range s.Spec.Ports {
			if _, err := containerPort(c, p.TargetPort, p.Protocol); err != nil {
				t.Errorf("Service %s port %s: %v", name, p.Name, err)
			}
		}
	}
	if m.pdb.Spec.Selector == nil || !selects(m.pdb.Spec.Selector.MatchLabels, labels) {
		t.Errorf("PodDisruptionBudget: selector does not select the pods")
	}
	if u := m.pdb.Spec.MaxUnavailable; u == nil || *u != intstr.FromInt32(1) {
		t.Errorf("PodDisruptionBudget: want maxUnavailable 1")
	}
}

func TestSecretKeys(t *testing.T) {
	m := load(t)
	keys := map[string]bool{}
	for k := range m.secret.StringData {
		keys[k] = true
	}
	for k := range m.secret.Data {
		keys[k] = true
	}
	c := m.container(t)
	used := 0
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		used++
		ref := e.ValueFrom.SecretKeyRef
		if ref.Name != m.secret.Name || !keys[ref.Key] {
			t.Errorf("%s: Secret %s has no key %q (keys: %v)", e.Name, ref.Name, ref.Key, keys)
		}
	}
	for _, name := range []string{"LINKRAFT_CLUSTER_KEY", "LINKRAFT_ADMIN_TOKEN"} {
		if v, ok := env(c, name); !ok || v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s: want it from the Secret", name)
		}
	}
	if used == 0 {
		t.Error("no variable comes from the Secret")
	}
}

// TestEnvNamesFlags catches a misspelt variable, which decoding cannot: the
// node ignores LINKRAFT_* names that are not flags of linkraft serve. The
// flags are README.md's Flags rows, which cmd/linkraft renders from its
// flag table and checks (TestReadmeFlagTable there).
func TestEnvNamesFlags(t *testing.T) {
	m := load(t)
	src, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.Index(src, []byte("\n## Flags\n")); i >= 0 {
		src = src[i+1:]
		if j := bytes.Index(src, []byte("\n## ")); j >= 0 {
			src = src[:j]
		}
	}
	flags := map[string]bool{}
	// A row names one flag or several: | `--log-level`, `--log-format` | …
	for _, row := range regexp.MustCompile("(?m)^\\| (`--[^|]*)\\|").FindAllSubmatch(src, -1) {
		for _, f := range regexp.MustCompile("`--([a-z0-9-]+)`").FindAllSubmatch(row[1], -1) {
			flags["LINKRAFT_"+strings.ToUpper(strings.ReplaceAll(string(f[1]), "-", "_"))] = true
		}
	}
	if !flags["LINKRAFT_BOOTSTRAP_EXPECT"] {
		t.Fatalf("found no serve flags in README.md's Flags table (%d); update the pattern", len(flags))
	}
	for _, e := range m.container(t).Env {
		if !flags[e.Name] {
			t.Errorf("env %s is not a flag of linkraft serve", e.Name)
		}
	}
}

// TestStrictDecodeRefusesTypos shows the decoder catches what this test is
// for: a misspelt field anywhere in a manifest.
func TestStrictDecodeRefusesTypos(t *testing.T) {
	// Each field as written in the file (indentation included, so that a
	// comment naming the field is not the one changed).
	for _, typo := range []struct {
		file, field, misspelt string
		into                  any
	}{
		{"statefulset.yaml", "  readOnlyRootFilesystem: true", "  readOnlyRootFileSystem: true", &appsv1.StatefulSet{}}, // case only
		{"statefulset.yaml", "  podManagementPolicy: Parallel", "  podManagmentPolicy: Parallel", &appsv1.StatefulSet{}},
		{"statefulset.yaml", "  failureThreshold: 6", "  failureTreshold: 6", &appsv1.StatefulSet{}},
		{"service-peers.yaml", "  publishNotReadyAddresses: true", "  publishNotReadyAddress: true", &corev1.Service{}},
		{"pdb.yaml", "  maxUnavailable: 1", "  maxUnavailible: 1", &policyv1.PodDisruptionBudget{}},
	} {
		src, err := os.ReadFile(typo.file)
		if err != nil {
			t.Fatal(err)
		}
		if err := decodeStrict(src, typo.into); err != nil {
			t.Fatalf("%s: %v", typo.file, err)
		}
		bad := bytes.Replace(src, []byte(typo.field), []byte(typo.misspelt), 1)
		if bytes.Equal(bad, src) {
			t.Fatalf("%s has no %q to misspell", typo.file, typo.field)
		}
		name := strings.TrimSpace(strings.SplitN(typo.misspelt, ":", 2)[0])
		if err := decodeStrict(bad, typo.into); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s with %s decoded: %v", typo.file, name, err)
		}
	}
}
