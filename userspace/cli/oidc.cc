// `cordon oidc show|rotate|publish`: the built-in issuer's keys (the oidc:
// section of the agent configuration; ops/oidc.h).
#include <cstdio>
#include <string>

#include "agent/config.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "ops/oidc.h"
#include "util/text.h"

namespace cordon::cli {
namespace {

const char* kOidcHelp =
    "usage: cordon oidc show [--config FILE]\n"
    "       cordon oidc rotate [--config FILE]\n"
    "       cordon oidc publish [--config FILE] [--dir DIR]\n"
    "\n"
    "The built-in issuer of spec.credentials[].oidc: cordon signs, for each sandbox, a JWT (ES256)\n"
    "that OIDC verifiers (Vault's JWT auth, AWS AssumeRoleWithWebIdentity, any OIDC library)\n"
    "check against the issuer's discovery document and JWKS. Its settings are the oidc: section\n"
    "of the agent configuration (default /etc/cordon/agent.yaml): issuer (the iss; default\n"
    "http://<metrics.listen>), keyDir (default /var/lib/cordon/oidc) and publishDir (default\n"
    "/var/lib/cordon/oidc/public). The agent serves both documents on its metrics listener, at\n"
    "<issuer path>/.well-known/openid-configuration and /.well-known/jwks.json.\n"
    "\n"
    "  show      the issuer, the key directory, the signing key's id (kid) and the JWKS\n"
    "            (the key is made, 0600, when the directory has none)\n"
    "  rotate    a new signing key; the old one stays in the JWKS as previous-key.pem, so tokens\n"
    "            it signed verify until they expire (rotate again only after the longest ttl);\n"
    "            the published files are rewritten, and a running agent reads the keys again\n"
    "  publish   write openid-configuration and jwks.json to --dir (default: publishDir), for a\n"
    "            static web server that serves them under <issuer>/.well-known/\n"
    "\n"
    "The private key never leaves keyDir: no output of cordon carries it.\n";

int Usage(const std::string& error) {
  PrintError(error);
  std::fputs(kOidcHelp, stderr);
  return 2;
}

}  // namespace

int OidcCommand(const Args& args) {
  if (args.empty()) return std::fputs(kOidcHelp, stderr), 2;
  if (args[0] == "-h" || args[0] == "--help") return std::fputs(kOidcHelp, stdout), 0;
  const std::string sub = args[0];
  if (sub != "show" && sub != "rotate" && sub != "publish")
    return Usage("unknown oidc subcommand '" + DisplayText(EscapeWorkloadBytes(sub)) + "'");
  ParsedArgs parsed;
  std::string error;
  std::vector<OptionSpec> options = {{"--config", "", true}, {"--help", "-h"}};
  if (sub == "publish") options.push_back({"--dir", "", true});
  if (!ParseArgs(Args(args.begin() + 1, args.end()), options, &parsed, &error)) return Usage(error);
  if (parsed.Has("--help")) return std::fputs(kOidcHelp, stdout), 0;
  if (!parsed.positionals.empty() || !parsed.after_dashdash.empty())
    return Usage("oidc " + sub + " takes no arguments, got '" + DisplayText(EscapeWorkloadBytes(
                                                                    parsed.positionals.empty() ? parsed.after_dashdash[0]
                                                                                               : parsed.positionals[0])) +
                 "'");
  const std::string path = parsed.Get("--config").value_or("");
  agent::AgentConfig config;
  policy::Diagnostics diags;
  if (!agent::LoadAgentConfig(path, !path.empty(), &config, &diags)) {
    std::fputs(policy::FormatDiagnostics(diags).c_str(), stderr);
    return PrintError("agent configuration " + (path.empty() ? std::string(agent::kDefaultConfigPath) : path) +
                      " rejected"),
           1;
  }
  const std::string issuer = config.OidcIssuer();
  const std::string where = config.file.empty() ? std::string(agent::kDefaultConfigPath) : config.file;
  if (issuer.empty() && sub != "rotate")
    return PrintError("the built-in issuer has no URL: set oidc.issuer (or metrics.listen with a port) in " + where),
           1;
  if (sub == "rotate") {
    auto before = ops::OidcSigner::LoadOrCreate(config.oidc_key_dir);
    if (!before) return PrintError("oidc rotate: " + before.error().ToString()), 1;
    Status rotated = ops::OidcSigner::Rotate(config.oidc_key_dir);
    if (!rotated.ok()) return PrintError("oidc rotate: " + rotated.error().ToString()), 1;
  }
  auto signer = ops::OidcSigner::LoadOrCreate(config.oidc_key_dir);
  if (!signer) return PrintError("oidc " + sub + ": " + signer.error().ToString()), 1;
  std::string out_dir = sub == "publish" ? parsed.Get("--dir").value_or(config.oidc_publish_dir) : config.oidc_publish_dir;
  if (sub == "publish" && out_dir.empty())
    return PrintError("oidc publish: no directory: give --dir, or set oidc.publishDir in " + where), 2;
  if (sub == "show") {
    std::printf("issuer: %s\nkey directory: %s\nsigning key: %s\njwks: %s\n", issuer.empty() ? "(none)" : issuer.c_str(),
                config.oidc_key_dir.c_str(), signer->kid().c_str(), signer->Jwks().c_str());
    return 0;
  }
  if (!out_dir.empty() && !issuer.empty()) {
    Status published = ops::PublishFiles(*signer, issuer, out_dir);
    if (!published.ok()) return PrintError("oidc " + sub + ": " + published.error().ToString()), 1;
  }
  if (sub == "rotate")
    std::printf("new signing key %s in %s; the previous one stays in the JWKS until the next rotation%s\n",
                signer->kid().c_str(), config.oidc_key_dir.c_str(),
                out_dir.empty() || issuer.empty() ? "" : ("; published in " + out_dir).c_str());
  else
    std::printf("%s/openid-configuration and %s/jwks.json written (issuer %s, signing key %s)\n", out_dir.c_str(),
                out_dir.c_str(), issuer.c_str(), signer->kid().c_str());
  return 0;
}

}  // namespace cordon::cli
