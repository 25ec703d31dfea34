//go:build !windows

package installer

import "errors"

// errNoRegistry is returned by the registry outside Windows, where a record
// listing registry keys can only come from a copied home directory.
var errNoRegistry = errors.New("the Windows registry does not exist on this OS")

// systemRegistry stands in for the Windows registry elsewhere; every call
// fails.
type systemRegistry struct{}

func (systemRegistry) SetDefault(root, path, value string) ([]string, error) {
	return nil, errNoRegistry
}

func (systemRegistry) GetDefault(root, path string) (string, error) { return "", errNoRegistry }

func (systemRegistry) Delete(root, path string) (bool, error) { return false, errNoRegistry }

func (systemRegistry) DeleteIfEmpty(root, path string) (bool, error) { return false, errNoRegistry }
