#include "cli/table.h"

#include <algorithm>

namespace cordon::cli {

size_t DisplayWidth(const std::string& text) {
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xc0) != 0x80;
  return n;
}

void Table::Add(std::vector<Cell> row, std::vector<std::string> details) {
  row.resize(header_.size(), Cell(""));
  rows_.push_back(std::move(row));
  details_.push_back(std::move(details));
}

std::string Table::Render(bool colour) const {
  std::vector<size_t> width(header_.size());
  for (size_t i = 0; i < header_.size(); ++i) width[i] = DisplayWidth(header_[i]);
  for (const auto& row : rows_)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], DisplayWidth(row[i].text));
  auto line = [&](const std::vector<Cell>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) {
      const bool last = i + 1 == cells.size();
      std::string pad = last ? "" : std::string(width[i] - DisplayWidth(cells[i].text) + 2, ' ');
      out += Paint(cells[i].text, cells[i].colour, colour) + pad;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::vector<Cell> head;
  for (const auto& h : header_) head.emplace_back(h, Colour::kBold);
  std::string out = line(head);
  for (size_t r = 0; r < rows_.size(); ++r) {
    out += line(rows_[r]);
    for (const auto& d : details_[r]) out += "  " + d + "\n";
  }
  return out;
}

}  // namespace cordon::cli
