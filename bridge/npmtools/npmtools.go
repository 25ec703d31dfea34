// Package npmtools finds what scripts/install-test-tools.sh installs from
// the npm registry into tools/npm (the MCP conformance suite, the
// Inspector, stdio MCP servers, the TypeScript SDK) and the Node.js that
// runs it, for the tests and for gwbench. The script is the one rule: its
// --check fails with a hint when tools/npm is missing or older than its
// lock file, and prints the Node.js to use (the machine's if it is at
// least 22.19, else the one tools/npm holds).
package npmtools

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Hint is what to do when the tools are missing.
const Hint = "run scripts/install-test-tools.sh"

// Tools are the installed npm tools of a checkout.
type Tools struct {
	Root    string // the repository
	Node    string // the Node.js binary that runs them
	Modules string // tools/npm/node_modules
}

// Module returns the path of a file inside an installed package, and an
// error naming it and Hint when it is not there.
func (t Tools) Module(elem ...string) (string, error) {
	path := filepath.Join(append([]string{t.Modules}, elem...)...)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is not installed (%w): %s", filepath.Join(elem...), err, Hint)
	}
	return path, nil
}

// Find returns the tools of the checkout at root.
func Find(root string) (Tools, error) {
	var stderr strings.Builder
	cmd := exec.Command(filepath.Join(root, "scripts", "install-test-tools.sh"), "--check")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Tools{}, fmt.Errorf("the npm test tools: %s (%v): %s", strings.TrimSpace(stderr.String()), err, Hint)
	}
	return Tools{Root: root, Node: strings.TrimSpace(string(out)), Modules: filepath.Join(root, "tools", "npm", "node_modules")}, nil
}

// Here returns the tools of the checkout holding the working directory
// (a test's is its package's directory).
func Here() (Tools, error) {
	wd, err := os.Getwd()
	if err != nil {
		return Tools{}, err
	}
	root, err := RepoRoot(wd)
	if err != nil {
		return Tools{}, err
	}
	return Find(root)
}

// RepoRoot returns the nearest directory at or above dir that holds go.mod.
func RepoRoot(dir string) (string, error) {
	for root := dir; ; {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			return root, nil
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", errors.New("no go.mod at or above " + dir)
		}
		root = parent
	}
}
