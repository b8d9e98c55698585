package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/term"

	"paynotify/config"
	"paynotify/console"
)

const hashPasswordUsage = `usage: paynotify hash-password [OPERATOR]

Reads a console operator's password (asked twice on a terminal, else the
first line of stdin) and prints its bcrypt hash, as OPERATOR:HASH when an
operator name is given: an entry for CONSOLE_OPERATORS (comma-separated)
or a line of CONSOLE_OPERATORS_FILE.

  paynotify hash-password alice                    # asks for the password
  printf '%s\n' "$PASSWORD" | paynotify hash-password alice
`

// passwordCost is the bcrypt cost of the hashes hash-password makes, the
// cost the console's stand-in for an unknown name has too.
const passwordCost = console.PasswordCost

// minPassword is the shortest password hash-password accepts.
const minPassword = 12

// hashPassword prints a bcrypt hash of a password read from the terminal
// (asked twice, not echoed) or from the first line of stdin, as a
// CONSOLE_OPERATORS entry when an operator name is given. The password is
// never taken from the command line, where history and ps would keep it.
func hashPassword(env environment) error {
	flags := newFlags("hash-password", hashPasswordUsage)
	if err := parseFlags(flags, env, 1); err != nil {
		return err
	}
	name := flags.Arg(0)
	if name != "" {
		if err := config.CheckOperatorName(name); err != nil {
			return refuseUsage(flags, env, err)
		}
	}
	password, err := readPassword(env)
	if err != nil {
		return err
	}
	if len(password) < minPassword {
		return fmt.Errorf("the password must have at least %d characters", minPassword)
	}
	if len(password) > 72 {
		return errors.New("bcrypt uses at most 72 bytes of a password: choose a shorter one")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), env.passwordCost())
	if err != nil {
		return err
	}
	if name != "" {
		fmt.Fprintf(env.stdout, "%s:%s\n", name, hash)
		return nil
	}
	fmt.Fprintf(env.stdout, "%s\n", hash)
	return nil
}

// passwordCost is the bcrypt cost hash-password uses: passwordCost unless
// a test asked for less.
func (env environment) passwordCost() int {
	if env.bcryptCost != 0 {
		return env.bcryptCost
	}
	return passwordCost
}

func readPassword(env environment) (string, error) {
	if f, ok := env.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(env.stderr, "Password: ")
		first, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(env.stderr)
		if err != nil {
			return "", err
		}
		fmt.Fprint(env.stderr, "Again: ")
		second, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(env.stderr)
		if err != nil {
			return "", err
		}
		if string(first) != string(second) {
			return "", errors.New("the passwords differ")
		}
		return string(first), nil
	}
	line, err := bufio.NewReader(env.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}
