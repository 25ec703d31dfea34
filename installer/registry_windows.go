//go:build windows

package installer

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/windows/registry"
)

func registryRoot(root string) (registry.Key, error) {
	switch root {
	case rootUser:
		return registry.CURRENT_USER, nil
	case rootMachine:
		return registry.LOCAL_MACHINE, nil
	}
	return 0, fmt.Errorf("unknown registry root %q", root)
}

// systemRegistry is the Windows registry.
type systemRegistry struct{}

// SetDefault creates root\path if needed and sets its default value to
// value. It returns the keys it created, outermost first.
func (systemRegistry) SetDefault(root, path, value string) ([]string, error) {
	rk, err := registryRoot(root)
	if err != nil {
		return nil, err
	}
	var missing []string
	for p := path; p != ""; {
		k, err := registry.OpenKey(rk, p, registry.QUERY_VALUE)
		if err == nil {
			k.Close()
			break
		}
		if !errors.Is(err, registry.ErrNotExist) {
			return nil, fmt.Errorf("opening %s\\%s: %w", root, p, err)
		}
		missing = append(missing, p)
		i := strings.LastIndexByte(p, '\\')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	k, _, err := registry.CreateKey(rk, path, registry.SET_VALUE)
	if err != nil {
		return nil, fmt.Errorf("creating %s\\%s: %w", root, path, err)
	}
	defer k.Close()
	slices.Reverse(missing)
	if err := k.SetStringValue("", value); err != nil {
		return missing, fmt.Errorf("setting %s\\%s: %w", root, path, err)
	}
	return missing, nil
}

// GetDefault returns the default value of root\path, or
// errRegistryNotFound if the key or value does not exist.
func (systemRegistry) GetDefault(root, path string) (string, error) {
	rk, err := registryRoot(root)
	if err != nil {
		return "", err
	}
	k, err := registry.OpenKey(rk, path, registry.QUERY_VALUE)
	if errors.Is(err, registry.ErrNotExist) {
		return "", errRegistryNotFound
	}
	if err != nil {
		return "", fmt.Errorf("opening %s\\%s: %w", root, path, err)
	}
	defer k.Close()
	v, _, err := k.GetStringValue("")
	if errors.Is(err, registry.ErrNotExist) {
		return "", errRegistryNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading %s\\%s: %w", root, path, err)
	}
	return v, nil
}

// Delete deletes root\path, which must have no subkeys. It reports false
// if the key did not exist.
func (systemRegistry) Delete(root, path string) (bool, error) {
	rk, err := registryRoot(root)
	if err != nil {
		return false, err
	}
	err = registry.DeleteKey(rk, path)
	if errors.Is(err, registry.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("deleting %s\\%s: %w", root, path, err)
	}
	return true, nil
}

// DeleteIfEmpty deletes root\path if it has neither subkeys nor values.
func (r systemRegistry) DeleteIfEmpty(root, path string) (bool, error) {
	rk, err := registryRoot(root)
	if err != nil {
		return false, err
	}
	k, err := registry.OpenKey(rk, path, registry.QUERY_VALUE|registry.ENUMERATE_SUB_KEYS)
	if errors.Is(err, registry.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("opening %s\\%s: %w", root, path, err)
	}
	info, err := k.Stat()
	k.Close()
	if err != nil {
		return false, fmt.Errorf("reading %s\\%s: %w", root, path, err)
	}
	if info.SubKeyCount > 0 || info.ValueCount > 0 {
		return false, nil
	}
	return r.Delete(root, path)
}
