// Allure 3 configuration for `make report`. The history file carries trends between
// nightly runs: keep it (or pass the previous one with HISTORY=...) and trends continue.
// make report runs Allure in reports/ (the run output) with --config pointing here: Allure
// resolves historyPath against the directory it runs in, so history.jsonl stays in reports/.
export default {
  name: "karpenter-e2e",
  historyPath: "./history.jsonl",
  plugins: {
    awesome: {
      options: { reportName: "karpenter-e2e", singleFile: true, reportLanguage: "en", groupBy: ["epic", "feature", "story"] },
    },
  },
};
