// An independent JWT verifier for the built-in OIDC issuer's tests: PyJWT
// (Debian's python3-jwt on python3-cryptography), used the way a verifier
// such as Vault or AWS STS checks a token: key picked from the JWKS by kid,
// ES256, audience, issuer, expiry.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <utility>

namespace cordon::test {

// stdout and stderr of a shell command, and whether it exited 0.
inline std::pair<bool, std::string> Shell(const std::string& command) {
  FILE* f = ::popen((command + " 2>&1").c_str(), "r");
  if (!f) return {false, "popen failed"};
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  int status = ::pclose(f);
  return {WIFEXITED(status) && WEXITSTATUS(status) == 0, out};
}

// The interpreter that has PyJWT with its cryptography backend: Debian's
// (python3-jwt installs there; python3 on PATH may be another one), else
// python3 on PATH; "" when neither has it.
inline std::string PythonWithJwt() {
  for (const char* python : {"/usr/bin/python3", "python3"})
    if (Shell(std::string(python) + " -c 'import sys, jwt, jwt.algorithms; sys.exit(not (jwt.algorithms.has_crypto and "
                                    "hasattr(jwt, \"PyJWKSet\")))'")
            .first)
      return python;
  return "";
}

// Verifies the token in the file argv[1] against the JWKS in the file
// argv[2], for audience argv[3] and issuer argv[4]. Prints "OK <header and
// claims as JSON>" or the PyJWT exception's name.
constexpr char kVerifyJwtPy[] = R"PY(
import json, sys, jwt
token = open(sys.argv[1]).read().strip()
jwks = jwt.PyJWKSet.from_json(open(sys.argv[2]).read())
try:
    header = jwt.get_unverified_header(token)
    keys = [k for k in jwks.keys if k.key_id == header.get("kid")]
    if not keys:
        print("NoMatchingKey"); sys.exit(1)
    claims = jwt.decode(token, keys[0].key, algorithms=["ES256"], audience=sys.argv[3], issuer=sys.argv[4])
    print("OK " + json.dumps({"header": header, "claims": claims}, sort_keys=True, ensure_ascii=False))
except jwt.PyJWTError as e:
    print(type(e).__name__ + ": " + str(e)); sys.exit(1)
)PY";

}  // namespace cordon::test
