// Self-checking testbench for counter: reset, count, hold, wrap, and reset while enabled.
`timescale 1ns/1ps
module tb;
    reg        clk = 1'b0;
    reg        rst = 1'b1;
    reg        en  = 1'b0;
    wire [7:0] count;
    integer    errors = 0;
    integer    i;

    counter dut (.clk(clk), .rst(rst), .en(en), .count(count));

    always #5 clk = ~clk;

    task expect_count(input [7:0] want);
        begin
            if (count !== want) begin
                $error("count is %0d, expected %0d", count, want);
                errors = errors + 1;
            end
        end
    endtask

    initial begin
        @(negedge clk);              // reset with enable low
        expect_count(8'd0);
        rst = 1'b0;
        en  = 1'b1;
        for (i = 1; i <= 5; i = i + 1) begin
            @(negedge clk);
            expect_count(i[7:0]);
        end
        en = 1'b0;                   // hold
        @(negedge clk);
        @(negedge clk);
        expect_count(8'd5);
        en = 1'b1;                   // count to 255, then wrap to 0
        for (i = 6; i <= 256; i = i + 1) begin
            @(negedge clk);
            expect_count(i[7:0]);
        end
        @(negedge clk);
        expect_count(8'd1);
        rst = 1'b1;                  // reset wins over enable
        @(negedge clk);
        expect_count(8'd0);
        if (errors != 0)
            $fatal(1, "counter: %0d check(s) failed", errors);
        $display("counter: all checks passed");
        $finish;
    end
endmodule
