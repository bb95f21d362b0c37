package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// goTree is what the module's Go files define: for each file (by its path
// from the module root) the functions and methods it declares ("f",
// "Type.Method", and the type names), and every test, benchmark and fuzz
// function.
type goTree struct {
	decls    map[string]map[string]bool // file → names
	tests    map[string]bool
	packages map[string]bool // directories with non-test Go files
}

func readGoTree(t *testing.T, root string) goTree {
	t.Helper()
	tree := goTree{decls: map[string]map[string]bool{}, tests: map[string]bool{}, packages: map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && p != root && (strings.HasPrefix(e.Name(), ".") || e.Name() == "node_modules" || e.Name() == "testdata") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		names := map[string]bool{}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				names[d.Name.Name] = true
				if r := receiverName(d); r != "" {
					names[r+"."+d.Name.Name] = true
				} else if strings.HasSuffix(rel, "_test.go") && regexp.MustCompile(`^(Test|Benchmark|Fuzz)[A-Z_]`).MatchString(d.Name.Name) {
					tree.tests[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						names[ts.Name.Name] = true
					}
				}
			}
		}
		tree.decls[filepath.ToSlash(rel)] = names
		if !strings.HasSuffix(rel, "_test.go") {
			tree.packages[filepath.ToSlash(filepath.Dir(rel))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// receiverName is the type a method is declared on, "" for a function.
func receiverName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return ""
	}
	typ := d.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// declares reports whether a file matching where (a path from the module
// root, "dir/file.go", a bare "file.go" anywhere, or a package directory)
// declares name.
func (g goTree) declares(where, name string) bool {
	for file, names := range g.decls {
		match := file == where || filepath.Dir(file) == where ||
			!strings.Contains(where, "/") && filepath.Base(file) == where
		if match && names[name] {
			return true
		}
	}
	return false
}

// docFiles are the documents that cite code: README.md, docs/*.md and
// every DESIGN.md.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, docs...)
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && p != root && (strings.HasPrefix(e.Name(), ".") || e.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if e.Name() == "DESIGN.md" {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A DESIGN file gives a package's rules, flows and whys in a few pages:
// at most designLines lines of at most designWidth characters.
const designLines, designWidth = 250, 100

func checkDesignSize(t *testing.T, rel, text string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > designLines {
		t.Errorf("%s has %d lines; a DESIGN file has at most %d", rel, len(lines), designLines)
	}
	for i, l := range lines {
		if n := len([]rune(l)); n > designWidth {
			t.Errorf("%s:%d is %d characters long; at most %d", rel, i+1, n, designWidth)
		}
	}
}

var (
	// A hop: dir/file.go:Func, file.go:Type.Method, or pkg:Type.Method.
	citedHop  = regexp.MustCompile("`?([a-z][a-z0-9_/]*(?:\\.go)?):([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)?)")
	citedTest = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*`)
)

// TestDocsCiteWhatExists: the documents name code that exists. Every
// `file:function` hop (README's flows, the DESIGN files), every test,
// benchmark or fuzz target they cite, and every package of the module in
// README's code map: a rename that leaves the docs behind fails here.
// And each DESIGN file stays within its size (checkDesignSize).
func TestDocsCiteWhatExists(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	tree := readGoTree(t, root)
	for _, doc := range docFiles(t, root) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		if filepath.Base(doc) == "DESIGN.md" {
			checkDesignSize(t, rel, string(text))
		}
		for _, m := range citedHop.FindAllStringSubmatch(string(text), -1) {
			where, name := m[1], m[2]
			if !strings.HasSuffix(where, ".go") && !tree.packages[where] {
				continue // not a hop: a URL's scheme, a time, a key:value
			}
			if !tree.declares(where, name) {
				t.Errorf("%s cites %s:%s, which %s does not declare", rel, where, name, where)
			}
		}
		for _, name := range citedTest.FindAllString(string(text), -1) {
			if !tree.tests[name] {
				t.Errorf("%s cites %s, which no _test.go file declares", rel, name)
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	codeMap := string(readme)
	if i := strings.Index(codeMap, "## Code map"); i >= 0 {
		codeMap = codeMap[i:]
		if j := strings.Index(codeMap[3:], "\n## "); j >= 0 {
			codeMap = codeMap[:j+3]
		}
	}
	var missing []string
	for pkg := range tree.packages {
		if pkg == "." || strings.HasPrefix(pkg, "e2e") || strings.Contains(pkg, "internal") {
			continue // tests, and what other packages keep to themselves
		}
		if !strings.Contains(codeMap, "`"+pkg+"`") {
			missing = append(missing, pkg)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("README's code map does not list the packages %v", missing)
	}
}

// TestMakefileFuzzesEveryTarget: `make test` runs every fuzz target of
// the module (the Makefile's FUZZ_TARGETS): a new one is not left out.
func TestMakefileFuzzesEveryTarget(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`\./([\w/]*):(Fuzz\w+)`).FindAllStringSubmatch(string(makefile), -1) {
		listed[filepath.Join(m[1], m[2])] = true
	}
	decl := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pkg, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			if !listed[filepath.Join(pkg, m[1])] {
				t.Errorf("%s in %s is not in the Makefile's FUZZ_TARGETS", m[1], pkg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
