//go:build !windows

package manifests_test

import (
	"fmt"

	"github.com/browserbridge/browserbridge/manifests"
)

func ExampleHostManifest() {
	data, err := manifests.HostManifest("/usr/local/bin/browserbridge-host",
		[]string{"abcdefghijklmnopabcdefghijklmnop", "ponmlkjihgfedcbaponmlkjihgfedcba"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(data))
	// Output:
	// {
	//   "name": "com.browserbridge.host",
	//   "description": "Browser Bridge native messaging host: connects the Browser Bridge extension to the local bridge service",
	//   "path": "/usr/local/bin/browserbridge-host",
	//   "type": "stdio",
	//   "allowed_origins": [
	//     "chrome-extension://abcdefghijklmnopabcdefghijklmnop/",
	//     "chrome-extension://ponmlkjihgfedcbaponmlkjihgfedcba/"
	//   ]
	// }
}
