package service

// The templates below are rendered by kardianos/service's own small template
// engine (v1.3), not text/template: values are referenced as {{Key}}, not
// {{.Key}}; {{range Key}} binds {{.}} to each item; pipelines call the
// functions kardianos supplies for the platform. The keys and functions used
// here are those kardianos passes on install: for systemd, Description, Path,
// Arguments and Restart with cmd (double-quote) and cmdEscape (space to \x20);
// for launchd, Name, Path, Arguments and RunAtLoad ("true"/"false") with html.

// systemdUnit is the bridge's systemd user unit.
//
//   - WantedBy=default.target: a user manager never reaches multi-user.target,
//     the target kardianos's built-in unit is wanted by, so that unit would
//     never start at login.
//   - Restart=on-failure with RestartSec=2 restarts a crashed bridge quickly;
//     StartLimitBurst stops a bridge that cannot start at all (its socket held
//     by an on-demand instance, say) from restarting forever.
//   - ExecStart escapes spaces in the executable's path as \x20 and quotes
//     each argument. systemd would still expand %, $ and backslashes, so
//     Control refuses to install a command containing them (validateCommand).
//   - kardianos's ConditionFileIsExecutable line is left out: systemd does not
//     unescape \x20 there, so a path with a space would never start.
const systemdUnit = `[Unit]
Description={{Description}}
StartLimitIntervalSec=60
StartLimitBurst=5

[Service]
Type=simple
ExecStart={{Path | cmdEscape}}{{range Arguments}} {{. | cmd}}{{end}}
Restart={{Restart}}
RestartSec=2

[Install]
WantedBy=default.target
`

// launchdPlist is the bridge's LaunchAgent. KeepAlive is a dictionary with
// SuccessfulExit false, so launchd restarts the bridge after it fails but not
// after a clean exit. Output goes to /dev/null because the bridge writes its
// own log file; kardianos would otherwise put two files in the home directory.
const launchdPlist = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>{{Name | html}}</string>
	<key>ProgramArguments</key>
	<array>
		<string>{{Path | html}}</string>
{{range Arguments}}		<string>{{. | html}}</string>
{{end}}	</array>
	<key>RunAtLoad</key>
	<{{RunAtLoad}}/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>StandardOutPath</key>
	<string>/dev/null</string>
	<key>StandardErrorPath</key>
	<string>/dev/null</string>
</dict>
</plist>
`
