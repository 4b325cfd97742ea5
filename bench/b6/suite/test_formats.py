"""B6 workload suite: email, XML, HTML and URL handling."""
import email
import email.policy
import html.parser
import unittest
import urllib.parse
import xml.etree.ElementTree as ET
from email.message import EmailMessage


class FormatsTest(unittest.TestCase):
    def test_email(self):
        for i in range(15):
            m = EmailMessage()
            m["From"] = f"runner{i}@example.org"
            m["To"] = "ci@example.org"
            m["Subject"] = f"build {i} finished"
            m.set_content("all tests passed\n" * 20)
            m.add_attachment(b"\x00\x01" * 500, maintype="application", subtype="octet-stream",
                             filename=f"log{i}.bin")
            parsed = email.message_from_bytes(m.as_bytes(), policy=email.policy.default)
            self.assertEqual(parsed["Subject"], f"build {i} finished")
            self.assertEqual(len(list(parsed.iter_attachments())), 1)

    def test_xml(self):
        root = ET.Element("policy")
        for i in range(1000):
            ET.SubElement(root, "rule", cidr=f"10.0.{i % 256}.0/24", port=str(i))
        text = ET.tostring(root)
        back = ET.fromstring(text)
        self.assertEqual(len(back.findall("rule")), 1000)

    def test_html_and_urls(self):
        class Links(html.parser.HTMLParser):
            def __init__(self):
                super().__init__()
                self.links = []

            def handle_starttag(self, tag, attrs):
                if tag == "a":
                    self.links.append(dict(attrs)["href"])

        doc = "".join(f'<p><a href="https://example.org/p?q={i}&x=%20y">l{i}</a></p>' for i in range(1000))
        p = Links()
        p.feed(doc)
        self.assertEqual(len(p.links), 1000)
        qs = [urllib.parse.parse_qs(urllib.parse.urlsplit(u).query) for u in p.links]
        self.assertEqual(qs[5]["x"], [" y"])


if __name__ == "__main__":
    unittest.main()
