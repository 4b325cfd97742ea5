// spec.onViolation: contain and spec.contain: what the kernel programs get
// (contain_after, the kinds mask) and every error with its file:line and field.
#include <gtest/gtest.h>

#include <string>

#include "abi/cordon_event.h"
#include "policy/compiler.h"
#include "policy/describe.h"
#include "tests/unit/policy_section.h"

namespace cordon::policy {
namespace {

// "onViolation: contain" on line 6, then `contain` from line 7.
SectionOutcome CompileContain(const std::string& contain_body) {
  return CompileSection("onViolation: contain\n  contain", contain_body, "c.yaml");
}

constexpr uint64_t Bit(int kind) { return 1ULL << kind; }

// Every kind the sandbox's programs, BPF LSM or cordon run's Landlock and
// seccomp filter refuse (file.memfd, tamper.personality, tamper.abi: seccomp
// only); not credential.read (an outsider's read, reported to the owner).
TEST(ContainOn, DefaultsToTheFirstRefusalOfEveryKindTheSandboxsProgramsOrBpfLsmRefuse) {
  SectionOutcome out = CompileSection("onViolation", "    contain\n", "c.yaml");
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  EXPECT_EQ(out.compiled.contain_after, 1u);
  for (int kind :
       {CORDON_EV_NET_CONNECT, CORDON_EV_NET_SENDMSG, CORDON_EV_NET_SOCKET, CORDON_EV_NET_UNIX, CORDON_EV_NET_BIND,
        CORDON_EV_NET_SOCKOPT, CORDON_EV_TAMPER_DEVICE, CORDON_EV_TAMPER_SYSCTL, CORDON_EV_FILE_OPEN,
        CORDON_EV_FILE_CREATE, CORDON_EV_FILE_EXEC, CORDON_EV_FILE_IOCTL, CORDON_EV_TAMPER_BPF, CORDON_EV_TAMPER_CGROUP,
        CORDON_EV_TAMPER_ACCT, CORDON_EV_FILE_MEMFD, CORDON_EV_TAMPER_PERSONALITY, CORDON_EV_TAMPER_ABI})
    EXPECT_TRUE(out.compiled.contain_kinds & Bit(kind)) << kind;
  for (int kind : {CORDON_EV_CREDENTIAL_READ, CORDON_EV_PROC_COREDUMP})
    EXPECT_FALSE(out.compiled.contain_kinds & Bit(kind)) << kind;
  EXPECT_EQ(out.compiled.lsm_flags & CORDON_LSM_F_KILL, 0u);
  const std::string described = Describe(out.compiled);
  EXPECT_NE(described.find("on violation: contain the sandbox in the kernel after 1 refusal ("), std::string::npos);
  EXPECT_NE(described.find("note: file and tamper refusals count where BPF LSM refuses them and, in cordon run, "
                           "where its Landlock or seccomp filter does"),
            std::string::npos)
      << described;
}

// File and tamper kinds, those only cordon run's seccomp filter refuses
// included (file.memfd, tamper.abi: the detect object counts them).
TEST(ContainOn, FileAndTamperKindsOfBpfLsmOrCordonRun) {
  SectionOutcome out =
      CompileContain("    after: 2\n    kinds: [file.open, file.exec, tamper.bpf, file.memfd, tamper.abi]\n");
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  EXPECT_EQ(out.compiled.contain_kinds, Bit(CORDON_EV_FILE_OPEN) | Bit(CORDON_EV_FILE_EXEC) |
                                            Bit(CORDON_EV_TAMPER_BPF) | Bit(CORDON_EV_FILE_MEMFD) |
                                            Bit(CORDON_EV_TAMPER_ABI));
  EXPECT_EQ(ContainKindsText(out.compiled.contain_kinds), "file.open, file.exec, tamper.bpf, file.memfd, tamper.abi");
  EXPECT_TRUE(ContainKindsNeedBpfLsm(out.compiled.contain_kinds));
  // The network kinds alone need no BPF LSM: no note.
  SectionOutcome net = CompileContain("    kinds: [net.]\n");
  ASSERT_TRUE(net.ok) << FormatDiagnostics(net.diags);
  EXPECT_FALSE(ContainKindsNeedBpfLsm(net.compiled.contain_kinds));
  EXPECT_EQ(Describe(net.compiled).find("note: file and tamper refusals"), std::string::npos);
}

TEST(ContainOn, AfterAndKindsAndFamilies) {
  SectionOutcome out = CompileContain("    after: 3\n    kinds: [net.connect, tamper.]\n");
  ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
  EXPECT_EQ(out.compiled.contain_after, 3u);
  EXPECT_EQ(out.compiled.contain_kinds & (Bit(CORDON_EV_NET_CONNECT) | Bit(CORDON_EV_TAMPER_DEVICE) |
                                          Bit(CORDON_EV_TAMPER_SYSCTL) | Bit(CORDON_EV_TAMPER_BPF)),
            Bit(CORDON_EV_NET_CONNECT) | Bit(CORDON_EV_TAMPER_DEVICE) | Bit(CORDON_EV_TAMPER_SYSCTL) |
                Bit(CORDON_EV_TAMPER_BPF));
  EXPECT_FALSE(out.compiled.contain_kinds & Bit(CORDON_EV_NET_SENDMSG));
  EXPECT_TRUE(out.compiled.contain_kinds & Bit(CORDON_EV_TAMPER_PERSONALITY));  // seccomp's, in the family too
  EXPECT_EQ(
      ContainKindsText(out.compiled.contain_kinds).rfind("net.connect, tamper.device, tamper.sysctl, tamper.bpf", 0),
      0u);
}

TEST(ContainOn, OtherActionsContainNothing) {
  for (const char* action : {"    report\n", "    kill\n"}) {
    SectionOutcome out = CompileSection("onViolation", action, "c.yaml");
    ASSERT_TRUE(out.ok) << FormatDiagnostics(out.diags);
    EXPECT_EQ(out.compiled.contain_after, 0u) << action;
    EXPECT_EQ(out.compiled.contain_kinds, 0u) << action;
  }
}

TEST(ContainOn, Errors) {
  ExpectSectionError(CompileContain("    after: 0\n"), "c.yaml", "spec.contain.after", 8, "must be 1..1000000");
  ExpectSectionError(CompileContain("    after: 1000001\n"), "c.yaml", "spec.contain.after", 8, "must be 1..1000000");
  ExpectSectionError(CompileContain("    kinds: [file.nothing]\n"), "c.yaml", "spec.contain.kinds[0]", 8,
                     "no refusal of kind 'file.nothing' can contain the sandbox");
  ExpectSectionError(CompileContain("    kinds: [tamper.personalty]\n"), "c.yaml", "spec.contain.kinds[0]", 8,
                     "no refusal of kind 'tamper.personalty' can contain the sandbox");
  ExpectSectionError(CompileContain("    kinds: [net.bind, net.bind]\n"), "c.yaml", "spec.contain.kinds[1]", 8,
                     "repeats 'net.bind'");
  ExpectSectionError(CompileSection("contain", "    after: 2\n", "c.yaml"), "c.yaml", "spec.contain", 7,
                     "takes effect only with onViolation: contain");
  ExpectSectionError(CompileSection("onViolation", "    freeze\n", "c.yaml"), "c.yaml", "spec.onViolation", 7,
                     "expected report, kill or contain");
}

}  // namespace
}  // namespace cordon::policy
